"""``kerrigan_device_busy_seconds_total``, rendered by Kerrigan rather than prometheus-client: both formats
parse as Prometheus parses them, with every device's value, whatever its id holds."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from kerrigan.metrics import DeviceBusy
from kerrigan.web.metrics import process_exposition

ODD = 'odd"id\\with\nnewline'


def busy() -> DeviceBusy:
    counter = DeviceBusy()
    counter.inc("modalix-bluebox", 12.5)
    counter.inc("modalix-bluebox", 0.25)
    counter.inc("orin-01", 0)
    counter.inc(ODD, 3)
    counter.inc("orin-01", -5)  # never backwards
    return counter


def test_the_text_format_parses_with_every_device() -> None:
    [family] = text_string_to_metric_families(busy().render(openmetrics=False))
    assert family.name == "kerrigan_device_busy_seconds"
    assert family.type == "counter"
    values = {sample.labels["device"]: sample.value for sample in family.samples}
    assert values == {"modalix-bluebox": 12.75, "orin-01": 0.0, ODD: 3.0}
    assert {sample.name for sample in family.samples} == {"kerrigan_device_busy_seconds_total"}


def test_openmetrics_parses_with_every_device() -> None:
    [family] = openmetrics_families(busy().render(openmetrics=True) + "# EOF\n")
    assert family.name == "kerrigan_device_busy_seconds"
    assert family.type == "counter"
    assert {sample.labels["device"]: sample.value for sample in family.samples} == {
        "modalix-bluebox": 12.75,
        "orin-01": 0.0,
        ODD: 3.0,
    }


def test_the_whole_exposition_is_valid_openmetrics_with_one_eof_at_its_end() -> None:
    body, content_type = process_exposition()("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    text = body.decode()
    assert text.endswith("# EOF\n")
    assert text.count("# EOF") == 1
    names = {family.name for family in openmetrics_families(text)}
    assert {"kerrigan_device_busy_seconds", "kerrigan_webhook_deliveries", "kerrigan_jobs"} <= names
    plain, plain_type = process_exposition()("")
    assert plain_type.startswith("text/plain; version=0.0.4")
    assert "kerrigan_device_busy_seconds" in {
        family.name for family in text_string_to_metric_families(plain.decode())
    }
