"""A results report through the store's JSON and back."""

from __future__ import annotations

import json

from kerrigan.core.results import Locator, parse_junit
from kerrigan.core.results.stored import report_from_json, report_json

JUNIT = b"""<?xml version="1.0"?>
<testsuites><testsuite name="uart">
  <testcase classname="tests.test_uart" name="test_baud" time="0.5"/>
  <testcase classname="tests.test_uart" name="test_echo" time="1.25">
    <failure message="assert 'x' == 'y'">tests/test_uart.py:42: AssertionError</failure>
    <system-out>sent x</system-out>
  </testcase>
  <testcase classname="tests.test_uart" name="test_dma"><skipped message="no DMA on this board"/></testcase>
</testsuite></testsuites>
"""


def test_a_report_survives_the_store_whole() -> None:
    report = parse_junit(JUNIT, "results/uart.xml", locator=Locator())
    assert report.cases[1].location is not None
    back = report_from_json(json.loads(json.dumps(report_json(report))))
    assert back == report


def test_a_document_it_cannot_read_gives_an_empty_report_not_an_error() -> None:
    back = report_from_json({"counts": "many", "cases": [{"o": "exploded"}, 7], "problems": [[1]]}, "x.xml")
    assert (back.file, back.cases, back.counts.total, back.problems) == ("x.xml", (), 0, ())
