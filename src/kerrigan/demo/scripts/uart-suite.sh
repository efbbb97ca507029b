#!/bin/sh
# The demo's UART suite on a simulated board: it uses the lab's VPN key (masked as *** in the output), keeps
# what the board's console answered (artifacts.upload) and writes JUnit XML (results); on SDK 2.1.1 the echo
# test fails.
set -e
echo "uart-suite: SDK $SDK on $KERRIGAN_DEVICE_ID at $BAUD baud, VPN key $LAB_VPN_KEY"
mkdir -p logs results
./scripts/console 'uname -r' > logs/console.log
echo_result='<testcase classname="tests.test_uart" name="test_echo" time="0.21"/>'
if [ "$SDK" = "2.1.1" ]; then
  echo_result='<testcase classname="tests.test_uart" name="test_echo" time="0.34"><failure message="echo lost 3 of 64 bytes">tests/test_uart.py:42: AssertionError: echo lost 3 of 64 bytes</failure></testcase>'
fi
cat > results/uart.xml <<XML
<?xml version="1.0"?>
<testsuite name="uart">
  <testcase classname="tests.test_uart" name="test_baud" time="0.12"/>
  $echo_result
  <testcase classname="tests.test_uart" name="test_dma"><skipped message="no DMA on this board"/></testcase>
</testsuite>
XML
[ "$SDK" != "2.1.1" ]  # a test runner's exit status: the failed test fails the job
