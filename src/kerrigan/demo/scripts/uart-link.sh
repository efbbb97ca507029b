#!/bin/sh
# The demo's two-board test on simulated boards: the device under test and its peer, each named by role.
echo "uart-link: $KERRIGAN_DEVICE_DUT_ID ($KERRIGAN_DEVICE_DUT_BOARD) <-> $KERRIGAN_DEVICE_PEER_ID ($KERRIGAN_DEVICE_PEER_BOARD): 64 of 64 bytes echoed"
