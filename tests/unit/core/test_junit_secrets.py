"""A job's secrets hidden in its JUnit results as they stand once parsed: however the file spells a value
(character references, CDATA sections or comments between its pieces, named entities), wherever it stands
(names, messages, types, text, output, suites, the places failures name, problems), and before anything is
cut, so that no piece of one is kept either."""

from __future__ import annotations

import pytest

from kerrigan.core.masking import Masker, SecretRefusedError
from kerrigan.core.results import JUnitParser, JUnitReport, Locator, ParseLimits, parse_junit, results_masker

KEY = "vpn-key-5f2b9c1e7d3a"
PASSWORD = "pa'ss\"w<rd>&42"
MASKER = Masker.for_secrets({"LAB_VPN_KEY": KEY, "LAB_PASS": PASSWORD})


def decimal(value: str) -> str:
    return "".join(f"&#{ord(c)};" for c in value)


def hexadecimal(value: str) -> str:
    return "".join(f"&#x{ord(c):X};" for c in value)


def named(value: str) -> str:
    entities = {"&": "&amp;", "'": "&apos;", '"': "&quot;", "<": "&lt;", ">": "&gt;"}
    return "".join(entities.get(c, c) for c in value)


def split(value: str, between: str) -> str:
    half = len(value) // 2
    return f"{value[:half]}{between}{value[half:]}"


SPELLINGS = {
    "decimal references": decimal(KEY),
    "hexadecimal references": hexadecimal(KEY),
    "two CDATA sections": f"<![CDATA[{KEY[:7]}]]><![CDATA[{KEY[7:]}]]>",
    "a CDATA section and a comment": f"<![CDATA[{KEY[:5]}]]>{split(KEY[5:], '<!-- -->')}",
    "a comment": split(KEY, "<!-- x -->"),
    "a processing instruction": split(KEY, "<?pi x?>"),
    "named entities": named(PASSWORD),
    "decimal references of the password": decimal(PASSWORD),
}
IN_ATTRIBUTES = {name: text for name, text in SPELLINGS.items() if "<" not in text}


def strings(report: JUnitReport) -> str:
    return repr(report)


def assert_hidden(report: JUnitReport) -> None:
    shown = strings(report)
    for value in (KEY, PASSWORD, repr(PASSWORD)[1:-1]):
        assert value not in shown
    assert "***" in shown


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("element", ["failure", "error", "system-out", "system-err"])
def test_a_secret_in_text_is_hidden_however_it_is_spelled(spelling: str, element: str) -> None:
    failed = "" if element in ("failure", "error") else '<failure message="m"/>'  # output is kept for these
    case = f"<testcase name='t'>{failed}<{element}>x {SPELLINGS[spelling]} y</{element}></testcase>"
    report = parse_junit(f"<testsuite>{case}</testsuite>".encode(), "r.xml", masker=MASKER)
    assert_hidden(report)


@pytest.mark.parametrize("spelling", sorted(IN_ATTRIBUTES))
@pytest.mark.parametrize(
    "template",
    [
        '<testsuite name="{}"><testcase name="t"><failure/></testcase></testsuite>',
        '<testsuite><testcase name="{}"/></testsuite>',
        '<testsuite><testcase classname="{}" name="t"/></testsuite>',
        '<testsuite><testcase name="t"><failure message="{}"/></testcase></testsuite>',
        '<testsuite><testcase name="t"><failure type="{}"/></testcase></testsuite>',
        '<testsuite><testcase name="t"><skipped message="x {} y"/></testcase></testsuite>',
    ],
    ids=["suite", "name", "class", "message", "type", "skipped"],
)
def test_a_secret_in_an_attribute_is_hidden_however_it_is_spelled(spelling: str, template: str) -> None:
    report = parse_junit(template.format(IN_ATTRIBUTES[spelling]).encode(), "r.xml", masker=MASKER)
    assert_hidden(report)


def test_a_multi_line_secret_in_an_attribute_is_hidden_by_its_references_to_line_ends() -> None:
    pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n-----END KEY-----"
    masker = Masker.for_secrets({"PEM": pem})
    written = pem.replace("\n", "&#10;")
    data = f'<testsuite><testcase name="t"><failure message="{written}"/></testcase></testsuite>'
    (case,) = parse_junit(data.encode(), "r.xml", masker=masker).cases
    assert "MIIEvQ" not in case.message
    assert case.message == "***"


def test_a_secret_where_the_kept_text_is_cut_is_hidden_before_the_cut() -> None:
    # The head keeps 750 characters of 1,000: the key straddles where the head ends.
    text = "x" * 740 + decimal(KEY) + "y" * 5_000
    data = f'<testsuite><testcase name="t"><failure>{text}</failure></testcase></testsuite>'
    (case,) = parse_junit(
        data.encode(), "r.xml", limits=ParseLimits(max_text_chars=1_000), masker=MASKER
    ).cases
    assert "characters cut" in case.details
    assert KEY[:6] not in case.details
    assert case.details.startswith("x" * 740 + "***")


def test_a_secret_in_a_name_longer_than_a_field_is_hidden_before_the_field_is_cut() -> None:
    data = f'<testsuite><testcase name="{"n" * 990}{decimal(KEY)}"/></testsuite>'
    (case,) = parse_junit(data.encode(), "r.xml", masker=MASKER).cases
    assert case.name == "n" * 990 + "***"


def test_a_secret_fed_across_pieces_is_hidden() -> None:
    data = f'<testsuite><testcase name="t"><failure>{split(KEY, "<!---->")}</failure></testcase></testsuite>'
    parser = JUnitParser("r.xml", masker=MASKER)
    for byte in data.encode():
        parser.feed(bytes([byte]))
    assert_hidden(parser.report())


def test_a_place_a_failure_names_is_found_in_the_masked_text() -> None:
    data = (
        f'<testsuite><testcase name="t" file="tests/{decimal(KEY)}.py" line="3"><failure/></testcase>'
        f'<testcase name="u"><failure>/ws/tests/{decimal(KEY)}/test_a.py:7: AssertionError</failure>'
        "</testcase>"
        "</testsuite>"
    )
    report = parse_junit(data.encode(), "r.xml", locator=Locator("/ws"), masker=MASKER)
    assert [str(case.location) for case in report.cases] == ["tests/***.py:3", "tests/***/test_a.py:7"]


@pytest.mark.parametrize(
    "data",
    [
        f"<!DOCTYPE {KEY}><testsuite/>".encode(),
        f"<{KEY}/>".encode(),
    ],
    ids=["doctype", "root"],
)
def test_a_secret_in_a_problem_is_hidden(data: bytes) -> None:
    report = parse_junit(data, "r.xml", masker=MASKER)
    assert report.problems
    assert_hidden(report)


def test_without_a_masker_nothing_is_hidden() -> None:
    data = f'<testsuite><testcase name="{decimal(KEY)}"/></testsuite>'.encode()
    assert parse_junit(data, "r.xml").cases[0].name == KEY


PEM = "-----BEGIN KEY-----\r\nMIIEvQIBADANBgkqhkiG9w0B\r\nAQEFAASCBKcwggSjAgEAAoIB\r\n-----END KEY-----"


@pytest.mark.parametrize(
    "template",
    [
        '<testsuite><testcase name="t"><failure message="{}"/></testcase></testsuite>',
        '<testsuite><testcase name="t"><failure>{}</failure></testcase></testsuite>',
    ],
    ids=["attribute: line ends become spaces", "text: line ends become line feeds"],
)
def test_a_multi_line_secret_written_as_it_is_is_hidden_as_xml_reads_its_line_ends(template: str) -> None:
    masker = results_masker({"PEM": PEM})
    assert masker is not None
    report = parse_junit(template.format(PEM).encode(), "r.xml", masker=masker)
    assert "-----BEGIN KEY-----" not in repr(report)  # the whole value, not only its long lines
    assert "MIIEvQ" not in repr(report)


def test_a_results_masker_keeps_refusing_a_value_too_short_to_mask() -> None:
    assert results_masker({}) is None
    assert results_masker({"A": "a\r\nbcdefg"}) is not None  # 9 bytes; its form with a line feed is 8
    with pytest.raises(SecretRefusedError):
        results_masker({"A": "short"})
