"""The README's run command: ``kerrigan demo`` from a fresh process, with nothing set up: its runner agents
drive simulated boards wired through devices files, and one board hangs at its first boot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_demo_pushes_and_prints_the_check_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", "demo"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "The webhook was answered 202 Accepted." in out
    assert "GitHub now shows 6 check runs" in out
    # The pipeline: a build check, then the UART suite per SDK with a secret, results and a kept log.
    assert "✗ kerrigan / hil-pipeline  (completed, failure)\n  1 of 4 jobs failed\n" in out
    assert "| `uart-suite (sdk=2.1.1)` | failed |" in out
    assert "VPN key ***" in out
    assert "demo-vpn-" not in out
    assert "failure: tests/test_uart.py:42: echo lost 3 of 64 bytes" in out
    # The suite kept what the board's console answered: "root@kerrigan-board:~# uname -r" and the release.
    assert "`logs/console.log` ([53 bytes](" in out
    # Two boards at once: the device under test and its peer, on the one runner host holding both.
    assert "| `uart-link` | succeeded | dut `modalix-old-02`<br>peer `davinci-old-01` | `lab-b-01` |" in out
    assert "root@kerrigan-board:~# echo link to davinci-old-01\n    link to davinci-old-01\n" in out
    assert "uart-link: modalix-old-02 (modalix) <-> davinci-old-01 (davinci): both consoles answered" in out
    assert "✓ kerrigan / hil-smoke  (completed, success)\n  Both jobs passed\n" in out
    assert "✓ kerrigan / legacy  (completed, success)" in out
    # The jobs' scripts talk to their boards' consoles: what the board prints is in the check runs.
    assert "root@kerrigan-board:~# uname -a\n    Linux kerrigan-board 6.1.0-kerrigan-arm64 #1 SMP" in out
    assert "smoke: logged in on the console, and the kernel answered" in out
    # boot-som reboots its board from the console and shows the boot, up to the login prompt.
    assert "] Run /sbin/init as init process\n    Starting syslogd: OK\n" in out
    assert "    kerrigan-board login:\n    boot: modalix-" in out
    # modalix-redbox's board hangs at its first boot: whichever job it held ended boot_failed, its check run
    # shows the console's last lines, and the job was retried on a peer, where it passed.
    assert "retried (boot_failed), attempt 1 of 3 on modalix-redbox |" in out
    assert (
        "- `boot_failed`: its board did not boot (a failure on its console, or no ready line in time)" in out
    )
    assert ": last lines of its board's console</summary>" in out
    assert "] printk: console [ttyS2] enabled\n    ```" in out  # where the kernel stopped
    assert re.search(
        r"\| succeeded, attempt 2 of 3 on modalix-\w+ after boot_failed on modalix-redbox \|", out
    )
    assert "modalix-redbox's board was told to hang at its first boot, midway through its kernel.\n" in out
    retried = re.search(
        r"\n(\S+) ended boot_failed on modalix-redbox: .*; retried on (\S+) \((\S+)\), it (\w+)\.", out
    )
    assert retried is not None, out
    assert retried[2] != "modalix-redbox"
    assert retried[4] == "succeeded"
    # Kerrigan power-cycled the hung board before its next job, and it booted: the device is good again.
    assert re.search(
        r"\nKerrigan recovered modalix-redbox before its next job: job \d+ power-cycled it, it booted\.\n",
        out,
    )
    assert "modalix-redbox's health: good (recovered: it booted); its board is off now" in out
    assert "● kerrigan / waiting  (queued)" in out
    assert "✗ kerrigan / org-class  (completed, failure)" in out
    assert "purpose expected ci, got ga-validation" in out
    assert "did you mean 'form_factor'?" in out
    assert "/sessions/" in out
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory
