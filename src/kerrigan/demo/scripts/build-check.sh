#!/bin/sh
# The demo's build check: nothing to build, but the UART suite waits for it (needs: build-check).
echo "build-check: firmware tree at $GITHUB_SHA is consistent (baud $BAUD)"
