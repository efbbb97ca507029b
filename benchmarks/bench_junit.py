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

``--crafted`` measures hostile files instead (issue 25), each of the 16 MiB a job may send, each parsed with
the server's limits in a process of its own: the process's peak resident memory (``ru_maxrss``) over what it
held before the parse, the parse's tracemalloc peak, its time, the tests kept and the size of the JSON the
store would keep. The shapes (:data:`CRAFTED`): one attribute of 16 MiB of wide characters; 1.3 million
attributes on one element; suites nested 670,000 deep; other elements nested 2.3 million deep; 1.4 million
empty tests; 50,000 tests with names and messages of 1,000 wide characters; one 16 MiB failure text.

    python benchmarks/bench_junit.py
    python benchmarks/bench_junit.py --quick
    python benchmarks/bench_junit.py --crafted
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
import xml.etree.ElementTree as StandardElementTree
from collections.abc import Callable
from xml.sax.saxutils import escape, quoteattr

from defusedxml.ElementTree import fromstring as defused_fromstring

from kerrigan.core.job_files import RESULTS_MAX_BYTES
from kerrigan.core.results import (
    Locator,
    failure_annotations,
    parse_junit,
    render_markdown,
    summarise,
)
from kerrigan.core.results.stored import report_json
from kerrigan.dispatch.results import LIMITS

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


def _fill(head: bytes, unit: bytes, tail: bytes, size: int) -> bytes:
    """``head``, as many ``unit`` as fit in ``size`` bytes with ``tail``, then ``tail``."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def huge_attribute(size: int) -> bytes:
    """One test whose name is the whole file, in characters of three bytes each (wider in memory)."""
    return _fill(b'<testsuite><testcase name="', "\u20ac".encode(), b'"/></testsuite>', size)


def many_attributes(size: int) -> bytes:
    """One test with as many attributes as fit (expat hands them over as one dict)."""
    head, tail = b"<testsuite><testcase ", b"/></testsuite>"
    count = (size - len(head) - len(tail)) // 12
    return head + b"".join(b'a%07d="" ' % index for index in range(count)) + tail


def deep_suites(size: int) -> bytes:
    """Suites inside suites, never closed (each a suite the reader keeps open)."""
    return _fill(b"<testsuites>", b'<testsuite name="x">', b"", size)


def deep_elements(size: int) -> bytes:
    """Elements of no meaning inside each other, never closed (expat's own stack)."""
    return _fill(b"<testsuites>", b"<a>", b"", size)


def tiny_tests(size: int) -> bytes:
    """As many empty tests as fit: an element every 11 bytes."""
    return _fill(b"<testsuite>", b"<testcase/>", b"</testsuite>", size)


def fat_tests(size: int) -> bytes:
    """Failed tests whose name, class, message and type are each 1,000 wide characters (each is cut to
    the limit of a field, and each is kept)."""
    wide = "\u20ac" * 1000
    unit = (
        f'<testcase name="{wide}" classname="{wide}"><failure message="{wide}" type="{wide}">x</failure>'
        "</testcase>"
    ).encode()
    return _fill(b"<testsuite>", unit, b"</testsuite>", size)


def giant_text(size: int) -> bytes:
    """One failure whose text is the whole file."""
    return _fill(b'<testsuite><testcase name="t"><failure>', b"x", b"</failure></testcase></testsuite>", size)


CRAFTED: dict[str, Callable[[int], bytes]] = {
    "huge_attribute": huge_attribute,
    "many_attributes": many_attributes,
    "deep_suites": deep_suites,
    "deep_elements": deep_elements,
    "tiny_tests": tiny_tests,
    "fat_tests": fat_tests,
    "giant_text": giant_text,
}


def crafted_one(name: str) -> dict[str, object]:
    """Parse one crafted file with the server's limits, in this process: what it cost."""
    data = CRAFTED[name](RESULTS_MAX_BYTES)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started = time.perf_counter()
    parsed = parse_junit(data, f"results/{name}.xml", limits=LIMITS)  # the server's, as it parses uploads
    stored = json.dumps(report_json(parsed))
    took = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "name": name,
        "rss_growth_mib": (after - before) / 1024,
        "tracemalloc_peak_mib": peak / (1 << 20),
        "seconds": took,
        "kept": len(parsed.cases),
        "counted": parsed.counts.total,
        "stored_kib": len(stored.encode()) / 1024,
        "problem": str(parsed.problems[0]) if parsed.problems else "",
    }


def crafted() -> None:
    """Each crafted shape in a process of its own (so that one's peak is not another's)."""
    print(f"crafted files of {RESULTS_MAX_BYTES >> 20} MiB, the server's limits; each in its own process")
    heads = ("RSS growth", "tracemalloc", "time", "kept", "stored")
    print(f"{'shape':<16} {heads[0]:>10} {heads[1]:>11} {heads[2]:>7} {heads[3]:>7} {heads[4]:>10}  problem")
    for name in CRAFTED:
        answer = subprocess.run(  # noqa: S603 -- this script, with a name of its own list
            [sys.executable, __file__, "--crafted-one", name], capture_output=True, text=True, check=True
        )
        row = json.loads(answer.stdout)
        print(
            f"{name:<16} {row['rss_growth_mib']:7.0f} MiB {row['tracemalloc_peak_mib']:8.0f} MiB "
            f"{row['seconds']:5.1f} s {row['kept']:7,} {row['stored_kib']:7,.0f} KiB  {row['problem'][:90]}"
        )


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
    parser.add_argument("--crafted", action="store_true", help="hostile files: memory, not speed")
    parser.add_argument("--crafted-one", choices=sorted(CRAFTED), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crafted_one:
        print(json.dumps(crafted_one(args.crafted_one)))
        return
    if args.crafted:
        crafted()
        return
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
