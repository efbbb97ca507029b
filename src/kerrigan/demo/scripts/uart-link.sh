#!/bin/sh
# The demo's two-board test: the device under test and its peer, each named by role, each with its console.
set -e
./scripts/console --role dut "echo link to $KERRIGAN_DEVICE_PEER_ID"
./scripts/console --role peer "echo link to $KERRIGAN_DEVICE_DUT_ID"
echo "uart-link: $KERRIGAN_DEVICE_DUT_ID ($KERRIGAN_DEVICE_DUT_BOARD) <-> $KERRIGAN_DEVICE_PEER_ID ($KERRIGAN_DEVICE_PEER_BOARD): both consoles answered"
