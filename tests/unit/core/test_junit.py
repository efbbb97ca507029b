"""JUnit XML results: the dialects read, hostile and broken files reported, the check run's table and
annotations within GitHub's limits."""

from __future__ import annotations

import xml.etree.ElementTree as StandardElementTree
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.results import (
    CaseResult,
    Counts,
    JUnitReport,
    Location,
    Locator,
    Outcome,
    ParseLimits,
    failure_annotations,
    parse_junit,
    render_markdown,
    summarise,
)
from kerrigan.core.results.locations import locate, locations_in
from kerrigan.core.results.parse import seconds_of
from kerrigan.core.results.summary import TITLE_LIMIT
from kerrigan.testing.github.schema import check_request_body, github_description

FIXTURES = Path(__file__).parent / "junit"
WORKSPACE = "/var/lib/kerrigan/jobs/812/workspace"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def by_name(report: JUnitReport) -> dict[str, CaseResult]:
    return {case.full_name: case for case in report.cases}


def suite_of(*cases: str, attributes: str = "") -> bytes:
    return f"<testsuite {attributes}>{''.join(cases)}</testsuite>".encode()


# -- dialects ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("pytest.xml", Counts(passed=2, failed=1, errors=1, skipped=2, time_s=3.412)),
        ("go.xml", Counts(passed=3, failed=1, errors=0, skipped=1, time_s=1.916)),
        ("surefire.xml", Counts(passed=2, failed=1, errors=1, skipped=1, time_s=1206.4)),
        ("twister.xml", Counts(passed=1, failed=1, errors=1, skipped=1, time_s=45.6)),
    ],
)
def test_each_dialect_is_counted_by_outcome_without_problems(name: str, counts: Counts) -> None:
    report = parse_junit(fixture(name), f"results/{name}")
    assert report.problems == ()
    assert report.counts == Counts(
        counts.passed, counts.failed, counts.errors, counts.skipped, pytest.approx(counts.time_s)
    )
    assert len(report.cases) == counts.total


def test_a_pytest_failure_is_located_at_the_failing_line_of_its_test_file() -> None:
    case = by_name(parse_junit(fixture("pytest.xml"), "r.xml"))["tests.test_uart.test_loopback[115200]"]
    assert case.outcome is Outcome.FAILED
    assert case.location == Location("tests/test_uart.py", 42)
    assert case.message.startswith("AssertionError: assert b'hello\\xff' == b'hello'")
    assert "tests/test_uart.py:42: AssertionError" in case.details
    assert case.stdout == "uart0: configured 115200 8N1\nuart0: wrote 5 bytes\n"
    assert case.time_s == pytest.approx(1.207)


def test_a_pytest_setup_error_is_located_in_the_repository_not_in_the_library_it_raised_from() -> None:
    case = by_name(parse_junit(fixture("pytest.xml"), "r.xml"))["tests.test_flash.test_erase"]
    assert case.outcome is Outcome.ERROR
    assert case.location == Location("tests/conftest.py", 31)


def test_skipped_tests_keep_their_reason_and_are_never_located() -> None:
    cases = by_name(parse_junit(fixture("pytest.xml"), "r.xml", locator=Locator(WORKSPACE)))
    assert cases["tests.test_gpio.test_blink"].message == "board has no user LED"
    assert cases["tests.test_gpio.test_irq"].outcome is Outcome.SKIPPED
    assert cases["tests.test_gpio.test_blink"].location is None


def test_go_failures_take_the_first_logged_line_and_a_placeholder_message_gives_way_to_the_text() -> None:
    case = by_name(parse_junit(fixture("go.xml"), "r.xml"))["github.com/acme/hil-tools/uart.TestBaudRate"]
    assert case.message == "baud_test.go:17: baud = 9600, want 115200"  # not go-junit-report's "Failed"
    assert case.location == Location("baud_test.go", 17)
    assert case.suite == "github.com/acme/hil-tools/uart"


def test_a_go_file_name_is_matched_to_the_repository_file_in_the_tests_package() -> None:
    files = frozenset({"uart/baud_test.go", "spi/baud_test.go", "go.mod"})
    report = parse_junit(fixture("go.xml"), "r.xml", locator=Locator(files=files))
    assert by_name(report)["github.com/acme/hil-tools/uart.TestBaudRate"].location == Location(
        "uart/baud_test.go", 17
    )


def test_surefire_java_frames_are_matched_to_the_test_class_and_reruns_are_not_outcomes() -> None:
    files = frozenset(
        {"src/test/java/com/acme/hil/UartTest.java", "src/main/java/com/acme/hil/Port.java", "pom.xml"}
    )
    cases = by_name(parse_junit(fixture("surefire.xml"), "r.xml", locator=Locator(files=files)))
    baud = cases["com.acme.hil.UartTest.baudRate"]
    assert baud.location == Location("src/test/java/com/acme/hil/UartTest.java", 42)
    assert baud.kind == "org.opentest4j.AssertionFailedError"
    assert baud.time_s == 1204.5  # Surefire's thousands separator
    parity = cases["com.acme.hil.UartTest.parity"]
    assert parity.location == Location("src/test/java/com/acme/hil/UartTest.java", 58)  # not Port.java:77
    assert cases["com.acme.hil.UartTest.reconnect"].outcome is Outcome.PASSED  # a <flakyFailure> only


def test_twister_paths_are_made_relative_to_the_workspace_and_names_keep_their_dots() -> None:
    cases = by_name(parse_junit(fixture("twister.xml"), "r.xml", locator=Locator("/home/ci/ws")))
    uart = cases["drivers.uart.async_api.single_read"]
    assert uart.location == Location("tests/drivers/uart/uart_async_api/src/test_uart_async.c", 171)
    assert uart.message.startswith("Assertion failed at ")  # twister's "failed" says nothing
    assert uart.suite == "modalix_evk/modalix"
    assert cases["drivers.spi.loopback"].location is None


def test_without_the_workspace_an_absolute_path_is_never_an_annotation() -> None:
    case = by_name(parse_junit(fixture("twister.xml"), "r.xml"))["drivers.uart.async_api.single_read"]
    assert case.location is None


def test_file_and_line_attributes_locate_a_test_whose_text_names_no_line_of_it() -> None:
    data = suite_of(
        '<testcase classname="t" name="a" file="tests/test_a.py" line="7"><failure message="boom"/>'
        "</testcase>",
        '<testcase classname="t" name="b" file="tests/test_a.py" line="9"><failure>'
        "tests/test_a.py:12: AssertionError</failure></testcase>",
        '<testcase classname="t" name="c" file="tests/test_a.py" line="0"><failure message="x"/></testcase>',
    )
    cases = by_name(parse_junit(data, "r.xml"))
    assert cases["t.a"].location == Location("tests/test_a.py", 7)
    assert cases["t.b"].location == Location("tests/test_a.py", 12)  # the failing line, not the test's
    assert cases["t.c"].location is None  # line 0 is no line


def test_nested_suites_make_a_path_of_their_names() -> None:
    data = (
        b'<testsuites><testsuite name="board"><testsuite name="uart"><testcase name="a"/></testsuite>'
        b'<testcase name="b"/></testsuite><testsuite name="flash"><testcase name="c"/></testsuite>'
        b"</testsuites>"
    )
    suites = {case.name: case.suite for case in parse_junit(data, "r.xml").cases}
    assert suites == {"a": "board / uart", "b": "board", "c": "flash"}


def test_a_deep_nest_of_suites_keeps_only_the_outermost_names() -> None:
    depth = 5_000
    data = b'<testsuite name="s">' * depth + b'<testcase name="deep"/>' + b"</testsuite>" * depth
    (case,) = parse_junit(data, "r.xml").cases
    assert case.suite == "s / s / s / s"


def test_namespaced_elements_are_read_as_plain_junit() -> None:
    data = b'<j:testsuite xmlns:j="urn:x"><j:testcase name="a"><j:skipped/></j:testcase></j:testsuite>'
    assert parse_junit(data, "r.xml").counts.skipped == 1


def test_a_test_with_a_failure_and_an_error_counts_once_as_its_worst() -> None:
    data = suite_of('<testcase name="a"><failure message="f"/><error message="e"/><skipped/></testcase>')
    report = parse_junit(data, "r.xml")
    assert report.counts == Counts(errors=1)
    assert report.cases[0].message == "e"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0.5", 0.5),
        (" 12 ", 12.0),
        ("1,204.5", 1204.5),
        ("1e-05", 1e-05),
        (".25", 0.25),
        ("0,5", None),
        ("nan", None),
        ("inf", None),
        ("-1", None),
        ("", None),
        ("12 s", None),
        (None, None),
    ],
)
def test_a_time_is_seconds_or_none(text: str | None, seconds: float | None) -> None:
    assert seconds_of(text) == seconds


def test_a_bad_time_is_none_and_counts_nothing() -> None:
    report = parse_junit(suite_of('<testcase name="a" time="soon"/>', '<testcase name="b" time="2"/>'), "r")
    assert [case.time_s for case in report.cases] == [None, 2.0]
    assert report.counts.time_s == 2.0


# -- locations -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("tests/test_a.py", "tests/test_a.py"),
        (f"{WORKSPACE}/src/uart.c", "src/uart.c"),
        ("./src/./drivers/../uart.c", "src/uart.c"),
        ("tests\\test_a.py", "tests/test_a.py"),
        ("../outside.py", None),
        ("src/../../outside.py", None),
        ("/etc/passwd", None),
        (f"{WORKSPACE}/../other/x.c", None),
        ("/var/lib/kerrigan/jobs/8120/workspace/x.c", None),  # a longer sibling of the workspace
        ("C:\\build\\x.c", None),
        ("", None),
    ],
)
def test_a_path_is_made_relative_to_the_repository_or_refused(path: str, relative: str | None) -> None:
    assert Locator(WORKSPACE + "/").relative(path) == relative


def test_with_the_repositorys_files_known_a_path_outside_them_is_refused() -> None:
    locator = Locator(files=frozenset({"src/uart.c", "a/x_test.go", "b/x_test.go"}))
    assert locator.relative("src/uart.c") == "src/uart.c"
    assert locator.relative("uart.c") == "src/uart.c"
    assert locator.relative("src/spi.c") is None
    assert locator.relative("x_test.go") is None  # two files of that name and nothing to choose by
    assert locator.relative("x_test.go", hint="example.com/m/b") == "b/x_test.go"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("tests/test_a.py:42: AssertionError", [("tests/test_a.py", 42)]),
        ("    x_test.go:17: got 1", [("x_test.go", 17)]),
        ("\tat com.acme.A.b(A.java:9)", [("A.java", 9)]),
        ('  File "tests/h.py", line 3, in helper', [("tests/h.py", 3)]),
        ("at /ws/src/t.c:64: check", [("/ws/src/t.c", 64)]),
        ("started 12:30:01 on host:8080", []),
        ("version 1.2:3", []),
        ("a.py:0: nothing", []),
    ],
)
def test_places_are_found_in_the_texts_of_each_dialect(text: str, found: list[tuple[str, int]]) -> None:
    assert locations_in(text) == found


def test_a_test_is_located_in_its_own_file_before_a_helper_it_called() -> None:
    text = "tests/helpers.py:5: in check\ntests/test_uart.py:20: in test_a\ntests/helpers.py:9: Error"
    assert locate(Locator(), text, hint="tests.test_uart") == Location("tests/test_uart.py", 20)
    assert locate(Locator(), text) == Location("tests/helpers.py", 5)


# -- hostile and broken files ------------------------------------------------------------------------


def test_the_billion_laughs_fixture_does_expand_in_an_unguarded_parser() -> None:
    # What makes the next test mean something: the standard library would expand it.
    root = StandardElementTree.fromstring(fixture("billion_laughs.xml"))
    assert len(root.find("testcase/failure").text or "") == 3 * 10**4  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["billion_laughs.xml", "xxe.xml"])
def test_a_doctype_is_refused_as_a_problem_naming_its_line_never_expanded(name: str) -> None:
    report = parse_junit(fixture(name), f"results/{name}")
    assert report.cases == ()
    (problem,) = report.problems
    assert problem.line == 2
    assert str(problem).startswith(f"results/{name}:2:")
    assert "DOCTYPE" in problem.message


def test_an_undeclared_entity_is_malformed_xml() -> None:
    (problem,) = parse_junit(suite_of('<testcase name="a">&secret;</testcase>'), "r.xml").problems
    assert problem.message.startswith("malformed XML: undefined entity")


def test_malformed_xml_names_line_and_column_and_keeps_the_tests_before_it() -> None:
    data = b'<testsuite>\n<testcase name="a"/>\n<testcase name="b"><failure>x</fail></testcase>\n</testsuite>'
    report = parse_junit(data, "results/bad.xml")
    assert [case.name for case in report.cases] == ["a"]
    (problem,) = report.problems
    assert (problem.line, problem.column) == (3, 32)  # the name of the wrong end tag
    assert str(problem) == "results/bad.xml:3:32: malformed XML: mismatched tag; tests listed before it: 1"


@pytest.mark.parametrize(
    ("data", "start"),
    [
        (b"", "malformed XML: no element found"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "malformed XML"),
        (b'<testsuite><testcase name="a">', "malformed XML: no element found"),
        (b'<?xml version="1.0" encoding="bogus"?><testsuite/>', "the file declares an encoding"),
        (b'<?xml version="1.0" encoding="shift_jis"?><testsuite/>', "cannot be read as XML"),
        (b'<coverage><testcase name="a"/></coverage>', "not JUnit XML: the root is <coverage>"),
    ],
)
def test_what_is_not_junit_is_one_problem_and_no_tests(data: bytes, start: str) -> None:
    report = parse_junit(data, "r.xml")
    assert report.counts.total == 0
    assert [problem.message[: len(start)] for problem in report.problems] == [start]


def test_a_file_over_the_byte_limit_is_cut_with_a_notice_keeping_the_tests_complete_before_the_cut() -> None:
    case = b'<testcase name="t" time="1"/>'
    data = b"<testsuites><testsuite>" + case * 100 + b"</testsuite></testsuites>"
    limit = len(b"<testsuites><testsuite>") + 10 * len(case) + 5  # in the middle of the 11th test
    report = parse_junit(data, "results/big.xml", limits=ParseLimits(max_bytes=limit), size=40 << 20)
    assert report.counts.total == 10
    (notice,) = report.problems  # the cut's unclosed XML is not reported as malformed
    assert notice.message.startswith(f"cut: 40.0 MiB, over the limit of {limit} bytes; only its first")


def test_tests_past_the_limit_are_counted_not_listed() -> None:
    data = suite_of(*['<testcase name="p"/>'] * 5, *['<testcase name="f"><failure/></testcase>'] * 3)
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_cases=4))
    assert report.counts == Counts(passed=5, failed=3)
    assert len(report.cases) == 4
    assert report.unlisted == 4
    assert [problem.message for problem in report.problems] == [
        "4 tests past the first 4 are counted but not listed"
    ]


def test_failure_text_is_kept_for_a_bounded_number_of_tests() -> None:
    data = suite_of(
        *[f'<testcase name="f{i}"><failure message="m{i}">trace {i}</failure></testcase>' for i in range(4)]
    )
    report = parse_junit(data, "r.xml", limits=ParseLimits(max_detailed=2))
    assert [case.details for case in report.cases] == ["trace 0", "trace 1", "", ""]
    assert [case.message for case in report.cases] == ["m0", "m1", "m2", "m3"]  # messages are kept for all
    (problem,) = report.problems
    assert (
        problem.message == "failure text, output and lines kept for the first 2 of the 4 failures and errors"
    )


def test_skipped_tests_do_not_use_up_the_failures_kept_in_detail() -> None:
    skips = ['<testcase name="s"><skipped message="no board">tests/t.py:1: no board</skipped></testcase>'] * 5
    failure = '<testcase name="f"><failure>tests/t.py:9: AssertionError</failure></testcase>'
    report = parse_junit(suite_of(*skips, failure), "r.xml", limits=ParseLimits(max_detailed=1))
    assert report.cases[-1].location == Location("tests/t.py", 9)
    assert report.problems == ()


def test_a_long_traceback_is_cut_in_the_middle_and_its_last_lines_still_locate_it() -> None:
    trace = "frame\n" * 50_000 + "tests/test_a.py:99: AssertionError"
    output = "log line\n" * 10_000
    data = suite_of(
        f'<testcase classname="tests.test_a" name="t"><failure>{trace}</failure>'
        f"<system-out>{output}</system-out><system-err>{output}</system-err></testcase>"
    )
    limits = ParseLimits(max_text_chars=1_000, max_output_chars=100)
    (case,) = parse_junit(data, "r.xml", limits=limits).cases
    assert len(case.details) < 1_100
    assert "characters cut ..." in case.details
    assert case.details.endswith("tests/test_a.py:99: AssertionError")
    assert case.location == Location("tests/test_a.py", 99)
    assert len(case.stdout) < 200
    assert len(case.stderr) < 200


def test_passed_tests_keep_no_output() -> None:
    data = suite_of('<testcase name="a"><system-out>chatty</system-out></testcase>')
    assert parse_junit(data, "r.xml").cases[0].stdout == ""


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="max_cases must be at least 1, not 0"):
        ParseLimits(max_cases=0)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_no_bytes_make_the_parser_raise(data: bytes) -> None:
    report = parse_junit(b"<testsuite>" + data, "r.xml")
    assert report.counts.total >= 0


_XML_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=80)


@settings(max_examples=100, deadline=None)
@given(name=_XML_TEXT, message=_XML_TEXT, text=_XML_TEXT, budget=st.integers(0, 2_000))
def test_any_test_text_renders_within_the_budget(name: str, message: str, text: str, budget: int) -> None:
    def escape(value: str) -> str:
        return value.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")

    data = suite_of(
        f'<testcase name="{escape(name)}"><failure message="{escape(message)}">{escape(text)}</failure>'
        "</testcase>"
    )
    report = parse_junit(data, "r.xml")
    markdown = render_markdown(summarise([report]), budget)
    assert len(markdown.encode()) <= budget
    for annotation in failure_annotations(summarise([report])):
        assert len(annotation.title) <= TITLE_LIMIT


# -- summary ---------------------------------------------------------------------------------------


def every_fixture_summary() -> list[JUnitReport]:
    names = ["pytest.xml", "go.xml", "surefire.xml", "twister.xml"]
    return [parse_junit(fixture(name), f"results/{name}", locator=Locator("/home/ci/ws")) for name in names]


def test_the_summary_puts_failures_and_errors_first_then_skipped_then_passed() -> None:
    summary = summarise(every_fixture_summary())
    outcomes = [case.outcome for case in summary.cases]
    ranks = {Outcome.FAILED: 0, Outcome.ERROR: 0, Outcome.SKIPPED: 1, Outcome.PASSED: 2}
    assert [ranks[outcome] for outcome in outcomes] == sorted(ranks[outcome] for outcome in outcomes)
    assert outcomes.count(Outcome.FAILED) + outcomes.count(Outcome.ERROR) == 7
    assert summary.counts.total == len(summary.cases) == 20
    assert summary.files == tuple(
        f"results/{name}" for name in ["pytest.xml", "go.xml", "surefire.xml", "twister.xml"]
    )


def test_the_table_lists_failures_with_escaped_messages_and_says_how_many_more_there_are() -> None:
    summary = summarise(every_fixture_summary())
    markdown = render_markdown(summary, 65_535, details_url="https://lab.example/sessions/9", max_rows=3)
    assert markdown.startswith(
        "### Test results\n\n**4 failed, 3 errors**, 5 skipped, 8 passed: 20 tests in 4 files, 1,257.3 s\n"
    )
    assert (
        "| **failed** | `tests.test_uart.test_loopback[115200]` | 1.207 s | "
        "AssertionError: assert b'hello\\xff' == b'hello'<br>Left contains one more item: 255 |\n"
    ) in markdown
    assert "expected: &lt;115200&gt; but was: &lt;9600&gt;" in markdown
    assert markdown.count("\n| ") == 4  # the header and 3 rows
    assert markdown.endswith("\n_and 17 more tests on the [session page](https://lab.example/sessions/9)._\n")


def test_a_pipe_in_a_name_or_message_does_not_split_the_row() -> None:
    data = suite_of('<testcase name="a|b"><failure message="x | y&#10;second line"/></testcase>')
    markdown = render_markdown(summarise([parse_junit(data, "r.xml")]), 10_000)
    assert "| **failed** | `a\\|b` |  | x \\| y<br>second line |\n" in markdown


@pytest.mark.parametrize("budget", [0, 40, 120, 400, 1_000, 5_000, 65_535])
def test_the_table_fits_the_budget_dropping_whole_rows_from_the_end(budget: int) -> None:
    cases = [f'<testcase name="t{i}"><failure message="{"m" * 200}"/></testcase>' for i in range(400)]
    summary = summarise([parse_junit(suite_of(*cases), "r.xml")])
    markdown = render_markdown(summary, budget, max_rows=1_000)
    assert len(markdown.encode()) <= budget
    assert all(line.endswith(" |") for line in markdown.splitlines() if line.startswith("| "))
    rows = markdown.count("| **failed** |")
    if markdown:
        assert markdown.endswith(f"_and {400 - rows:,} more tests on the session page._\n")


def test_problems_are_listed_under_the_counts() -> None:
    reports = [parse_junit(fixture("xxe.xml"), "results/xxe.xml"), parse_junit(fixture("go.xml"), "go.xml")]
    markdown = render_markdown(summarise(reports), 65_535)
    assert "\n- results/xxe.xml:2:21: a DOCTYPE (&lt;!DOCTYPE testsuite&gt;) is refused" in markdown


def test_no_tests_says_so() -> None:
    markdown = render_markdown(summarise([parse_junit(b"<testsuites/>", "r.xml")]), 1_000)
    assert markdown == "### Test results\n\nno tests: 0 tests in 1 file\n"


def test_annotations_are_the_located_failures_in_githubs_shape() -> None:
    summary = summarise(every_fixture_summary())
    found = [annotation.as_json() for annotation in failure_annotations(summary)]
    assert found[0] == {
        "path": "tests/test_uart.py",
        "start_line": 42,
        "end_line": 42,
        "annotation_level": "failure",
        "title": "tests.test_uart.test_loopback[115200]",
        "message": "AssertionError: assert b'hello\\xff' == b'hello'\n  \n  Left contains one more item: 255",
        "raw_details": summary.cases[0].details,
    }
    paths = [annotation["path"] for annotation in found]
    assert "tests/drivers/uart/uart_async_api/src/test_uart_async.c" in paths
    assert len(found) == 6  # the 7 failures and errors but twister's timeout, which names no line


@pytest.mark.github_description
def test_annotations_are_what_github_s_description_accepts() -> None:
    found = [annotation.as_json() for annotation in failure_annotations(summarise(every_fixture_summary()))]
    description = github_description()
    assert description is not None
    body = {
        "name": "kerrigan / hil",
        "head_sha": "a" * 40,
        "output": {"title": "t", "summary": "s", "annotations": found},
    }
    check_request_body(description, "POST", "/repos/acme/firmware/check-runs", body)


def test_annotations_are_bounded_in_number_and_cut_to_githubs_sizes() -> None:
    long_name = "n" * 400
    message = "é" * 5_000
    cases = [
        f'<testcase name="{long_name}{i}"><failure message="{message}">tests/t.py:{i + 1}: E</failure>'
        "</testcase>"
        for i in range(80)
    ]
    summary = summarise([parse_junit(suite_of(*cases), "r.xml", limits=ParseLimits(max_field_chars=10_000))])
    found = failure_annotations(summary, message_bytes=1_000, details_bytes=100_000)
    assert len(found) == 50
    assert {len(annotation.title) for annotation in found} == {TITLE_LIMIT}
    assert {len(annotation.message.encode()) for annotation in found} == {1_000}
    assert [annotation.start_line for annotation in found[:3]] == [1, 2, 3]
