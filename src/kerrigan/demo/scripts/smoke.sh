#!/bin/sh
# The demo's smoke test: what a real one does against the board on $KERRIGAN_DEVICE_ID, simulated.
echo "smoke: $GITHUB_REPOSITORY at ${GITHUB_SHA%"${GITHUB_SHA#????????????}"} on $KERRIGAN_DEVICE_ID ($KERRIGAN_DEVICE_BOARD), CPUs $KERRIGAN_CPUS"
echo "smoke: opening the UART console... ok"
echo "smoke: login prompt within 2 s... ok"
echo "smoke: 3 of 3 checks passed"
