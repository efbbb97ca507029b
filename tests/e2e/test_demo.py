"""The README's run command: ``kerrigan demo`` from a fresh process, with nothing set up."""

from __future__ import annotations

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
    assert "`logs/console.log` ([42 bytes](" in out
    # Two boards at once: the device under test and its peer, on the one runner host holding both.
    assert "| `uart-link` | succeeded | dut `modalix-old-02`<br>peer `davinci-old-01` | `lab-b-01` |" in out
    assert "uart-link: modalix-old-02 (modalix) <-> davinci-old-01 (davinci): 64 of 64 bytes echoed" in out
    assert "✓ kerrigan / hil-smoke  (completed, success)\n  Both jobs passed\n" in out
    assert "✓ kerrigan / legacy  (completed, success)" in out
    assert "smoke: 3 of 3 checks passed" in out  # a runner agent ran the pushed script
    assert "boot: kernel up in 1.8 s" in out
    assert "● kerrigan / waiting  (queued)" in out
    assert "✗ kerrigan / org-class  (completed, failure)" in out
    assert "purpose expected ci, got ga-validation" in out
    assert "did you mean 'form_factor'?" in out
    assert "/sessions/" in out
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory
