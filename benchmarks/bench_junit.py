"""Time reading and summing up a large JUnit XML report (:mod:`kerrigan.core.results`).

A synthetic report of 50,000 tests (``--quick``: 5,000) in nested suites (boards, then modules), as pytest
writes them: 2 % failures with a pytest traceback of about 20 lines and captured output, 5 % skipped with a
reason, the rest passed. Measured, each the median of a few runs:

- ``parse_junit`` of the bytes, then ``summarise``, ``render_markdown`` within the check run's 65,535
  bytes and ``failure_annotations`` (the first 50): the whole path from an uploaded file to the check run;
- the baseline, in the same run: a bare ``defusedxml.ElementTree.fromstring`` of the same bytes (the same
  guarded parser building a tree and reading nothing), and the standard library's
  ``xml.etree.ElementTree.fromstring`` (its C tree builder, unguarded);
- the peak memory (tracemalloc) of ``parse_junit`` against that of the defusedxml tree.

Target (issue 15): 50,000 tests parsed and summed up in at most 1 s, on a 2-core machine.

    python benchmarks/bench_junit.py
    python benchmarks/bench_junit.py --quick
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import tracemalloc
import xml.etree.ElementTree as StandardElementTree
from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from defusedxml.ElementTree import fromstring as defused_fromstring

from kerrigan.core.results import (
    Locator,
    failure_annotations,
    parse_junit,
    render_markdown,
    summarise,
)

TARGET_S = 1.0
SUMMARY_LIMIT = 65_535
FAILED_SHARE = 0.02
SKIPPED_SHARE = 0.05
WORKSPACE = "/var/lib/kerrigan/jobs/812/workspace"
TRACEBACK = """dut = <Dut modalix-{board:02d}>, baud = {baud}

    @pytest.mark.parametrize("baud", BAUDS)
    def {name}(dut, baud):
        dut.uart.configure(baud)
        frame = dut.uart.exchange(b"ping", timeout=2)
>       assert frame.payload == b"pong", frame.describe()
E       AssertionError: framing error after {baud} baud: got 0x{byte:02x}
E       assert b'pinf' == b'pong'
E
E         At index 3 diff: b'f' != b'g'
E         Full diff:
E         - b'pong'
E         + b'pinf'

{path}:{line}: in {name}
    helpers.check_frame(frame)
{workspace}/tests/helpers.py:88: in check_frame
    raise AssertionError(frame.describe())
E   AssertionError: framing error after {baud} baud: got 0x{byte:02x}
"""


def report(tests: int, rng: random.Random) -> bytes:
    """A pytest-shaped report of ``tests`` tests: suites per board, module suites inside them."""
    boards = max(1, tests // 1_000)
    modules = 10
    per_module = tests // (boards * modules)
    parts = ['<?xml version="1.0" encoding="utf-8"?><testsuites name="hil">']
    for board in range(boards):
        parts.append(f'<testsuite name="modalix-{board:02d}" hostname="hil-rack-{board % 4}">')
        for module in range(modules):
            path = f"tests/hil/test_module_{module}.py"
            parts.append(f'<testsuite name="{path}" tests="{per_module}">')
            for index in range(per_module):
                name = f"test_case_{index}"
                attributes = (
                    f'classname="tests.hil.test_module_{module}" name="{name}[{board}]" '
                    f'time="{rng.expovariate(1 / 0.2):.3f}"'
                )
                draw = rng.random()
                if draw < FAILED_SHARE:
                    baud = rng.choice((9600, 115200, 921600))
                    text = TRACEBACK.format(
                        board=board,
                        baud=baud,
                        name=name,
                        byte=rng.randrange(256),
                        path=path,
                        line=40 + index % 200,
                        workspace=WORKSPACE,
                    )
                    message = quoteattr(f"AssertionError: framing error after {baud} baud")
                    output = escape(f"uart0: configured {baud} 8N1\n" * 5)
                    parts.append(
                        f"<testcase {attributes}><failure message={message}>{escape(text)}</failure>"
                        f"<system-out>{output}</system-out></testcase>"
                    )
                elif draw < FAILED_SHARE + SKIPPED_SHARE:
                    reason = "board has no second UART"
                    parts.append(
                        f'<testcase {attributes}><skipped type="pytest.skip" message="{reason}">'
                        f"{path}:{index}: {reason}</skipped></testcase>"
                    )
                else:
                    parts.append(f"<testcase {attributes} />")
            parts.append("</testsuite>")
        parts.append("</testsuite>")
    parts.append("</testsuites>")
    return "".join(parts).encode()


def whole_path(data: bytes) -> tuple[int, int, int]:
    """Parse, sum up, render and annotate: (tests, summary bytes, annotations)."""
    parsed = parse_junit(data, "results/hil.xml", locator=Locator(WORKSPACE))
    summary = summarise([parsed])
    markdown = render_markdown(summary, SUMMARY_LIMIT, details_url="https://lab.example/sessions/1")
    found = failure_annotations(summary)
    return summary.counts.total, len(markdown.encode()), len(found)


def timed(work: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` calls of ``work``."""
    walls, cpus = [], []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), time.thread_time()
        work()
        walls.append(time.perf_counter() - started)
        cpus.append(time.thread_time() - cpu_started)
    return statistics.median(walls), statistics.median(cpus)


def peak_mib(work: Callable[[], object]) -> float:
    """Peak memory that ``work`` allocates while it runs, in MiB."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 tests instead of 50,000")
    args = parser.parse_args()
    tests, runs = (5_000, 3) if args.quick else (50_000, 5)
    data = report(tests, random.Random(15))
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    counted, summary_bytes, annotated = whole_path(data)
    parsed = parse_junit(data, "results/hil.xml", locator=Locator(WORKSPACE))
    counts = parsed.counts
    print(
        f"report: {len(data) / (1 << 20):.1f} MiB, {counted:,} tests ({counts.failed:,} failed, "
        f"{counts.skipped:,} skipped) in nested suites; summary {summary_bytes:,} bytes, "
        f"{annotated} annotations; problems: {len(parsed.problems)}"
    )
    ours, ours_cpu = timed(lambda: whole_path(data), runs)
    parse_only, _ = timed(lambda: parse_junit(data, "results/hil.xml", locator=Locator(WORKSPACE)), runs)
    defused, defused_cpu = timed(lambda: defused_fromstring(data, forbid_dtd=True), runs)
    standard, standard_cpu = timed(lambda: StandardElementTree.fromstring(data), runs)  # noqa: S314
    print(
        f"parse + summary + table + annotations: {ours * 1000:.0f} ms (CPU {ours_cpu * 1000:.0f} ms; "
        f"parse alone {parse_only * 1000:.0f} ms)"
    )
    print(
        f"baseline, defusedxml fromstring (a tree, nothing read): {defused * 1000:.0f} ms "
        f"(CPU {defused_cpu * 1000:.0f} ms); ours is {ours / defused:.2f}x that"
    )
    print(
        f"baseline, xml.etree fromstring (C tree builder, unguarded): {standard * 1000:.0f} ms "
        f"(CPU {standard_cpu * 1000:.0f} ms); ours is {ours / standard:.2f}x that"
    )
    ours_peak = peak_mib(lambda: parse_junit(data, "results/hil.xml", locator=Locator(WORKSPACE)))
    tree_peak = peak_mib(lambda: defused_fromstring(data, forbid_dtd=True))
    print(f"peak memory: parse_junit {ours_peak:.1f} MiB, defusedxml tree {tree_peak:.1f} MiB")
    if not args.quick:
        met = ours <= TARGET_S
        print(f"{'met' if met else 'missed'} {tests:,} tests parsed and summed up <= {TARGET_S:.0f} s")


if __name__ == "__main__":
    main()
