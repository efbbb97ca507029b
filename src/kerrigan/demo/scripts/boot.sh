#!/bin/sh
# The demo's boot test. The runner agent power-cycled the board and waited for its login prompt before this
# ran; reboot it from its console and watch it come up again.
set -e
./scripts/console reboot
echo "boot: $KERRIGAN_DEVICE_ID came up again (its first boot, after the power cycle, took $KERRIGAN_BOOT_SECONDS s)"
