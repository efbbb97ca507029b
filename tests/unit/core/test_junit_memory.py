"""JUnit XML files crafted to cost the parser memory: each stops at a limit with a problem naming where,
keeping the tests before it, and the parse's memory stays bounded whatever the file holds."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest

from kerrigan.core.results import (
    UPLOAD_LIMITS,
    CaseResult,
    Counts,
    JUnitParser,
    JUnitReport,
    Outcome,
    ParseLimits,
    parse_junit,
)
from kerrigan.core.results.summary import listed_first, summarise

MIB = 1 << 20
BEFORE = b'<testsuites><testsuite name="s"><testcase name="first"/>'


def stopped(report: JUnitReport) -> str:
    """The one problem of a report that stopped, with the first test kept."""
    assert [case.name for case in report.cases] == ["first"]
    (problem,) = report.problems
    return str(problem)


def test_elements_nested_too_deep_stop_the_parse_at_the_first_too_deep() -> None:
    data = BEFORE + b"<a>" * 60 + b"</a>" * 60 + b"</testsuite></testsuites>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_depth=50))
    column = len(BEFORE) + 3 * 48 + 1  # the 51st element open is the 49th <a>
    assert stopped(report) == (
        f"r.xml:1:{column}: not read past here: elements are nested more than 50 deep; "
        "tests listed before it: 1"
    )


def test_an_element_with_too_many_attributes_stops_the_parse() -> None:
    attributes = b" ".join(b'a%d="x"' % index for index in range(11))
    data = BEFORE + b"<testcase " + attributes + b"/></testsuite></testsuites>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_attributes=10))
    assert stopped(report).endswith(
        "not read past here: <testcase> has more than 10 attributes; tests listed before it: 1"
    )


def test_too_many_different_names_stop_the_parse() -> None:
    data = BEFORE + b"".join(b"<x%d/>" % index for index in range(30)) + b"</testsuite></testsuites>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_names=20))
    assert "not read past here: more than 20 different element and attribute names" in stopped(report)


def test_too_many_elements_stop_the_parse_keeping_the_counts_so_far() -> None:
    data = b"<testsuite>" + b'<testcase name="t"/>' * 200 + b"</testsuite>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_elements=100))
    assert report.counts == Counts(passed=99)  # the suite is the 1st element
    (problem,) = report.problems
    assert problem.message == "not read past here: more than 100 elements; tests listed before it: 99"


@pytest.mark.parametrize(
    "token",
    [
        b'<testcase name="' + b"n" * (300 * 1024) + b'"/>',  # one attribute
        b"<testcase " + b" ".join(b'a%06d=""' % index for index in range(30_000)) + b"/>",  # many
        b"<!--" + b"c" * (300 * 1024) + b"-->",
        b"<?pi " + b"p" * (300 * 1024) + b"?>",
    ],
    ids=["attribute", "attributes", "comment", "instruction"],
)
def test_a_token_over_the_limit_stops_the_parse_before_expat_holds_it_whole(token: bytes) -> None:
    data = BEFORE + token + b"</testsuite></testsuites>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_token_bytes=100 * 1024))
    assert "not read past here: a tag, comment or processing instruction runs past 100 KiB" in stopped(
        report
    ).replace("102,400 bytes", "100 KiB")


def test_long_text_is_no_token_it_is_read_as_it_comes() -> None:
    text = b"x" * (3 * MIB)
    data = b'<testsuite><testcase name="t"><failure>' + text + b"</failure></testcase></testsuite>"
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_token_bytes=100 * 1024))
    assert report.problems == ()
    assert report.counts == Counts(failed=1)


def test_passed_tests_stop_being_listed_first_so_a_late_failure_still_is() -> None:
    passed = [f'<testcase name="passed-{index:03d}"/>' for index in range(100)]  # 10 characters each
    failed = '<testcase name="late"><failure message="boom"/></testcase>'
    data = f"<testsuite>{''.join(passed)}{failed}</testsuite>".encode()
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_kept_chars=400))
    assert report.counts == Counts(passed=100, failed=1)
    assert [case.name for case in report.cases] == [f"passed-{index:03d}" for index in range(31)] + ["late"]
    assert [problem.message for problem in report.problems] == [
        "69 tests are counted but not listed: the names and text kept of one file stop at 400 characters "
        "(failures first)"
    ]


def test_a_failure_past_every_limit_of_kept_text_is_counted_not_listed() -> None:
    failed = [f'<testcase name="f{index}"><failure message="{"m" * 50}"/></testcase>' for index in range(10)]
    report = parse_junit(
        f"<testsuite>{''.join(failed)}</testsuite>".encode(), "r.xml", limits=ParseLimits(max_kept_chars=200)
    )
    assert report.counts == Counts(failed=10)
    assert len(report.cases) == 3  # 53 characters each: a fourth would pass 200


def test_a_parser_fed_in_pieces_reads_what_one_fed_whole_reads() -> None:
    cases = "".join(
        f'<testcase classname="c" name="t{index}"><failure message="m">text {index} &amp; more</failure>'
        "</testcase>"
        for index in range(50)
    )
    data = f'<?xml version="1.0"?><testsuites><testsuite name="s">{cases}</testsuite></testsuites>'.encode()
    parser = JUnitParser("r.xml")
    for start in range(0, len(data), 7):
        parser.feed(data[start : start + 7])
    assert parser.report() == parse_junit(data, "r.xml")


def test_a_parser_stops_at_max_bytes_and_says_the_file_was_cut() -> None:
    parser = JUnitParser("r.xml", limits=ParseLimits(max_bytes=40))
    parser.feed(b'<testsuite><testcase name="a"/><testcase name="b"/>')
    parser.feed(b"</testsuite>")
    report = parser.report(size=1000)
    assert [case.name for case in report.cases] == ["a"]
    assert report.problems[0].message.startswith("cut: 1,000 bytes, over the limit of 40 bytes")


# -- memory -------------------------------------------------------------------------------------------


def _fill(head: bytes, unit: bytes, tail: bytes, size: int) -> bytes:
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


FAT_TEST = '<testcase name="{w}" classname="{w}"><failure message="{w}" type="{w}">x</failure></testcase>'
CRAFTED: dict[str, Callable[[int], bytes]] = {
    "huge attribute": lambda size: _fill(
        b'<testsuite><testcase name="', "€".encode(), b'"/></testsuite>', size
    ),
    "many attributes": lambda size: (
        b"<testsuite><testcase "
        + b"".join(b'a%07d="" ' % index for index in range((size - 40) // 12))
        + b"/></testsuite>"
    ),
    "deep suites": lambda size: _fill(b"<testsuites>", b'<testsuite name="x">', b"", size),
    "deep elements": lambda size: _fill(b"<testsuites>", b"<a>", b"", size),
    "many names": lambda size: b"<testsuite>" + b"".join(b"<n%07d/>" % i for i in range((size - 30) // 11)),
    "fat tests": lambda size: _fill(
        b"<testsuite>",
        FAT_TEST.replace("{w}", "€" * 1000).encode(),
        b"</testsuite>",
        size,
    ),
    "giant text": lambda size: _fill(
        b'<testsuite><testcase name="t"><failure>', b"x", b"</failure></testcase></testsuite>", size
    ),
}


@pytest.mark.parametrize("shape", sorted(CRAFTED))
def test_a_crafted_file_is_parsed_within_a_bounded_peak_of_memory(shape: str) -> None:
    # Before the parser was bounded, "many attributes" of 4 MiB took some 90 MiB and "deep elements" 160.
    data = CRAFTED[shape](4 * MIB)
    tracemalloc.start()
    try:
        report = parse_junit(data, f"results/{shape}.xml", limits=UPLOAD_LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * MIB, f"{shape}: {peak / MIB:.1f} MiB"
    assert report.counts.total >= 0


@pytest.mark.parametrize("shape", ["fat tests", "deep elements"])
def test_a_parse_leaves_no_cycle_that_keeps_its_tests_until_the_collector_runs(shape: str) -> None:
    # The server collects rarely (kerrigan.app.tune_collector): what only a full pass frees stays for long.
    data = CRAFTED[shape](MIB)
    gc.collect()
    gc.disable()
    try:
        report = parse_junit(data, "r.xml", limits=UPLOAD_LIMITS)
        del report
        assert gc.collect() == 0
    finally:
        gc.enable()


# -- what a page lists --------------------------------------------------------------------------------


def _report(file: str, *outcomes: Outcome) -> JUnitReport:
    cases = tuple(
        CaseResult(f"{file}-{index}", "", "", outcome, None) for index, outcome in enumerate(outcomes)
    )
    counts = Counts(
        passed=outcomes.count(Outcome.PASSED),
        failed=outcomes.count(Outcome.FAILED),
        errors=outcomes.count(Outcome.ERROR),
        skipped=outcomes.count(Outcome.SKIPPED),
    )
    return JUnitReport(file, cases, counts)


P, F, E, S = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED


@pytest.mark.parametrize("limit", [0, 1, 3, 5, 8, 100])
@pytest.mark.parametrize("chars", [None, 0, 3, 10, 25, 1_000])
def test_listing_files_one_at_a_time_keeps_what_the_summary_shows_first(
    limit: int, chars: int | None
) -> None:
    reports = [_report("a", P, P, F, S), _report("b", E, P, F), _report("c", S, S, P, F)]  # 3 characters each
    shown = summarise(reports).cases
    fit = len(shown) if chars is None else chars // 3
    kept: list[JUnitReport] = []
    for report in reports:
        kept = listed_first([*kept, report], limit, chars)
    summary = summarise(kept)
    assert summary.cases == shown[: min(limit, fit)]
    assert summary.counts == summarise(reports).counts  # every test still counted
