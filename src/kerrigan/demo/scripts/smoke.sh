#!/bin/sh
# The demo's smoke test: log in on the board's console and ask its kernel who it is.
set -e
echo "smoke: $GITHUB_REPOSITORY at ${GITHUB_SHA%"${GITHUB_SHA#????????????}"} on $KERRIGAN_DEVICE_ID ($KERRIGAN_DEVICE_BOARD), CPUs $KERRIGAN_CPUS"
./scripts/console 'uname -a' 'cat /proc/version'
echo "smoke: logged in on the console, and the kernel answered"
