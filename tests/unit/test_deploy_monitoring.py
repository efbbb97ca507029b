"""deploy/prometheus and deploy/grafana: the alert rules and the dashboard use only Kerrigan's metric names.

The names are DESIGN.md's ("Operations"): a metric renamed in the code and not here, or the other way round,
fails these tests. ``promtool`` (Debian's ``prometheus`` package; ``.ci/install-deploy-tools``) checks the
rules, runs their unit tests and checks the dashboard's queries; without it those tests skip.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
ALERT_TESTS = REPO / "deploy" / "prometheus" / "alerts.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "kerrigan.json"

# The metric names of DESIGN.md, "Operations", with their types. Gauges read from the shared database report
# the same figure on every replica: they are aggregated with max (or min), never summed.
COUNTERS = frozenset(
    {
        "kerrigan_webhook_deliveries_total",
        "kerrigan_sessions_total",
        "kerrigan_jobs_total",
        "kerrigan_device_busy_seconds_total",
        "kerrigan_github_requests_total",
        "kerrigan_runner_admission_refusals_total",
    }
)
HISTOGRAMS = frozenset({"kerrigan_webhook_ack_seconds", "kerrigan_queue_wait_seconds"})
DB_WIDE_GAUGES = frozenset(
    {
        "kerrigan_queue_jobs",
        "kerrigan_devices",
        "kerrigan_runner_hosts",
        "kerrigan_runner_heartbeat_age_seconds",
        "kerrigan_checkrun_pending",
        "kerrigan_checkrun_lag_seconds",
        "kerrigan_reservations",
    }
)
GAUGES = DB_WIDE_GAUGES | {
    "kerrigan_github_rate_remaining",
    "kerrigan_github_rate_limit",
    "kerrigan_github_rate_reset_timestamp_seconds",
    # The runner agent's own registry (`kerrigan runner --metrics-port`).
    "kerrigan_runner_jobs",
    "kerrigan_runner_vcpus_claimed",
    "kerrigan_runner_vcpus_max",
    "kerrigan_runner_vcpus_allocatable",
    "kerrigan_runner_disk_free_bytes",
}
# What a query may select: a histogram by its series, the rest by name.
SERIES = (
    COUNTERS | GAUGES | {f"{name}_{suffix}" for name in HISTOGRAMS for suffix in ("bucket", "sum", "count")}
)
RATE_FUNCTIONS = frozenset({"rate", "irate", "increase"})
AGGREGATORS = frozenset(
    {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "group"}
)
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
)


# --- reading PromQL -----------------------------------------------------------------------------------------


def _strip(expr: str) -> str:
    """``expr`` with strings, label matchers, ranges and Grafana's variables blanked out (same length)."""

    def blank(match: re.Match[str]) -> str:
        return " " * len(match.group(0))

    expr = re.sub(r'"(?:[^"\\]|\\.)*"', blank, expr)
    expr = re.sub(r"\{[^{}]*\}", blank, expr)
    expr = re.sub(r"\[[^\[\]]*\]", blank, expr)
    return re.sub(r"\$\{?\w+\}?", blank, expr)


def _selectors(expr: str) -> list[tuple[int, str]]:
    """(position, name) of each metric a PromQL expression selects: its names, less functions, keywords and
    the label lists of ``by (...)``, ``on (...)`` and their kind."""
    stripped = _strip(expr)
    stripped = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)",
        lambda match: match.group(1) + " " * (len(match.group(0)) - len(match.group(1))),
        stripped,
    )
    found = []
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped):
        name = match.group(0)
        if name in KEYWORDS or re.match(r"\s*(?:(?:by|without)\s*)?\(", stripped[match.end() :]):
            continue  # a keyword, or a function or aggregation being called
        if re.fullmatch(r"(?i)inf|nan", name):
            continue
        found.append((match.start(), name))
    return found


def _enclosing_calls(expr: str, position: int) -> Iterator[str]:
    """The functions and aggregations around ``position``, innermost first (``max by (pool) (x)`` is max)."""
    stripped = _strip(expr)
    depth = 0
    for index in range(position - 1, -1, -1):
        char = stripped[index]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth:
                depth -= 1
                continue
            before = stripped[:index].rstrip()
            if match := re.search(r"([A-Za-z_]+)\s*(?:by|without)\s*\([^()]*\)\s*$", before):
                yield match.group(1)
            elif match := re.search(r"([A-Za-z_]+)\s*$", before):
                name = match.group(1)
                if name in ("by", "without"):  # `max (x) by (pool)`-style: the call is further out
                    continue
                yield name
            else:
                yield "("  # a parenthesised sub-expression


def _problems(expr: str) -> list[str]:
    """What is wrong with a query by the metric contract: unknown names, counters not rated, DB-wide gauges
    summed over replicas."""
    problems = []
    selectors = _selectors(expr)
    if not selectors:
        problems.append(f"selects no metric: {expr}")
    for position, name in selectors:
        if name not in SERIES:
            problems.append(f"{name} is not a Kerrigan metric: {expr}")
            continue
        calls = [call for call in _enclosing_calls(expr, position) if call != "("]
        counter = name in COUNTERS or name.endswith(("_bucket", "_sum", "_count"))
        if counter and (not calls or calls[0] not in RATE_FUNCTIONS):
            problems.append(f"{name} is a counter: take its rate() or increase(): {expr}")
        if name in DB_WIDE_GAUGES:
            first = next((call for call in calls if call in AGGREGATORS), None)
            if first not in ("max", "min"):
                problems.append(
                    f"{name} is the same on every replica: aggregate it with max, not {first}: {expr}"
                )
    return problems


@pytest.mark.parametrize(
    ("expr", "wanted"),
    [
        ("max by (pool) (kerrigan_queue_jobs)", []),
        ('sum by (pool) (max by (pool, state) (kerrigan_devices{health="bad"})) > 0', []),
        ("histogram_quantile(0.99, sum by (le) (rate(kerrigan_webhook_ack_seconds_bucket[5m])))", []),
        ("max by (pool) (kerrigan_queue_depth)", ["kerrigan_queue_depth is not a Kerrigan metric"]),
        ("sum(up)", ["up is not a Kerrigan metric"]),
        ("sum by (pool) (kerrigan_queue_jobs)", ["aggregate it with max, not sum"]),
        ("kerrigan_checkrun_lag_seconds > 300", ["aggregate it with max, not None"]),
        ("sum(kerrigan_jobs_total)", ["is a counter"]),
        ('sum(rate(kerrigan_jobs_total{state="failed"}[$__rate_interval]))', []),
    ],
)
def test_the_query_reader_finds_what_is_wrong(expr: str, wanted: list[str]) -> None:
    """The checks below would let a renamed metric or a summed DB-wide gauge through if this reader did."""
    problems = _problems(expr)
    assert len(problems) == len(wanted), problems
    for problem, fragment in zip(problems, wanted, strict=True):
        assert fragment in problem


# --- the alert rules ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    assert set(document) == {"groups"}
    found = []
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "rules"}, group.get("name")
        found.extend(group["rules"])
    return found


def test_alerts_cover_what_an_operator_must_hear_of(rules: list[dict[str, Any]]) -> None:
    exprs = {rule["alert"]: " ".join(rule["expr"].split()) for rule in rules}
    assert "kerrigan_runner_heartbeat_age_seconds" in exprs["KerriganRunnerHostSilent"]
    assert 'kerrigan_runner_hosts{state="offline"}' in exprs["KerriganRunnerHostsOffline"]
    assert "kerrigan_queue_jobs[15m]" in exprs["KerriganQueueGrowing"]
    assert exprs["KerriganCheckRunsLagging"] == "max(kerrigan_checkrun_lag_seconds) > 300"
    # Past 10 minutes it pages: pull requests have shown the wrong state of Kerrigan's checks that long.
    assert exprs["KerriganCheckRunsStuck"] == (
        "max(kerrigan_checkrun_pending) > 0 and max(kerrigan_checkrun_lag_seconds) > 600"
    )
    severities = {rule["alert"]: rule["labels"]["severity"] for rule in rules}
    assert severities["KerriganCheckRunsStuck"] == "critical"
    assert 'health="bad"' in exprs["KerriganDevicesBad"]
    budget = exprs["KerriganGitHubRateBudgetLow"]
    assert "(kerrigan_github_rate_remaining / kerrigan_github_rate_limit)" in budget
    assert budget.endswith(") < 0.1")
    assert "kerrigan_github_rate_reset_timestamp_seconds > time()" in budget  # a stale figure does not fire
    durations = {rule["alert"]: rule["for"] for rule in rules}
    assert durations["KerriganRunnerHostSilent"] == "2m"
    assert durations["KerriganQueueGrowing"] == "15m"


def test_every_alert_has_a_severity_a_summary_and_a_description(rules: list[dict[str, Any]]) -> None:
    assert rules
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), names
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"Kerrigan[A-Z][A-Za-z]+", rule["alert"])
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        annotations = rule["annotations"]
        assert set(annotations) >= {"summary", "description"}, rule["alert"]
        assert len(annotations["summary"]) <= 120, rule["alert"]
        assert "\n" not in annotations["summary"], rule["alert"]
        assert len(annotations["description"]) > len(annotations["summary"]), rule["alert"]


def test_alert_expressions_use_only_kerrigan_metrics_aggregated_right(rules: list[dict[str, Any]]) -> None:
    problems = [f"{rule['alert']}: {problem}" for rule in rules for problem in _problems(rule["expr"])]
    assert not problems, "\n".join(problems)


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (.ci/install-deploy-tools installs it)")
    return found


def _run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120, cwd=cwd)


def test_promtool_checks_the_rules(rules: list[dict[str, Any]], tmp_path: Path) -> None:
    promtool = _promtool()
    done = _run(promtool, "check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout
    # A control: the same check refuses a rule with a broken expression, so its verdict above means something.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "groups:\n  - name: broken\n    rules:\n      - alert: Broken\n"
        "        expr: max(kerrigan_queue_jobs\n"
    )
    refused = _run(promtool, "check", "rules", str(broken))
    assert refused.returncode != 0, refused.stdout


def test_promtool_unit_tests_of_the_rules_pass() -> None:
    """alerts.test.yml: a silent host, a growing queue, lagging and stuck check runs, a low budget and bad
    devices fire; a host that heartbeats, a steady queue, a short lag, a healthy budget and retired devices do
    not."""
    promtool = _promtool()
    document = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    cases = [case for test in document["tests"] for case in test["alert_rule_test"]]
    assert sum(1 for case in cases if case["exp_alerts"]) >= 2
    assert sum(1 for case in cases if not case["exp_alerts"]) >= 1
    assert {"KerriganCheckRunsLagging", "KerriganCheckRunsStuck"} <= {
        case["alertname"] for case in cases if case["exp_alerts"]
    }
    done = _run(promtool, "test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


# --- the dashboard ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in _panels(dashboard)
        for target in panel.get("targets", [])
    ]


def test_dashboard_has_a_datasource_variable_every_panel_uses(dashboard: dict[str, Any]) -> None:
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in _panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        for target in panel["targets"]:
            assert target.get("datasource", panel["datasource"]) == panel["datasource"], panel["title"]
    # Any other variable a query uses is defined.
    used = {name for _, expr in _queries(dashboard) for name in re.findall(r"\$\{?(\w+)", expr)}
    assert used - {"__rate_interval", "__interval", "__range"} <= set(variables), used


def test_dashboard_panels_have_unique_ids_and_fit_the_grid(dashboard: dict[str, Any]) -> None:
    panels = _panels(dashboard)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), sorted(ids)
    assert dashboard["uid"] == "kerrigan"
    assert dashboard["title"]
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], f"{panel['title']} shows nothing"
            assert all(target["refId"] for target in panel["targets"])


def test_dashboard_queries_use_only_kerrigan_metrics_aggregated_right(dashboard: dict[str, Any]) -> None:
    queries = _queries(dashboard)
    assert queries
    problems = [f"{title}: {problem}" for title, expr in queries for problem in _problems(expr)]
    assert not problems, "\n".join(problems)


def test_dashboard_shows_the_figures_it_promises(dashboard: dict[str, Any]) -> None:
    used = {name for _, expr in _queries(dashboard) for _, name in _selectors(expr)}
    assert {
        "kerrigan_queue_jobs",
        "kerrigan_queue_wait_seconds_bucket",
        "kerrigan_device_busy_seconds_total",
        "kerrigan_devices",
        "kerrigan_jobs_total",
        "kerrigan_webhook_ack_seconds_bucket",
        "kerrigan_github_rate_remaining",
        "kerrigan_github_rate_limit",
        "kerrigan_checkrun_lag_seconds",
        "kerrigan_runner_hosts",
    } <= used, sorted(used)
    texts = " ".join(expr for _, expr in _queries(dashboard))
    for quantile in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({quantile}," in texts


def test_promtool_parses_the_dashboard_queries(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """Each query, its Grafana variables filled in, as a recording rule: promtool parses its PromQL."""
    promtool = _promtool()
    filled = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "pool": ".*"}
    rules = [
        {
            "record": f"kerrigan:dashboard_query_{index}",
            "expr": re.sub(r"\$\{?(\w+)\}?", lambda match: filled[match.group(1)], expr),
        }
        for index, (_, expr) in enumerate(_queries(dashboard))
    ]
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = _run(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout
