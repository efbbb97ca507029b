#!/bin/sh
# The demo's boot test: flash, power-cycle and wait for the board to come up, simulated.
echo "boot: flashing firmware to $KERRIGAN_DEVICE_ID... ok"
echo "boot: power cycle... ok"
echo "boot: kernel up in 1.8 s"
