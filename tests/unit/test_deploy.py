"""deploy/: the image, compose.yaml and the systemd units parse, and name only real settings and commands.

Nothing here needs Docker. ``systemd-analyze`` checks the units when it is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kerrigan.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEMD = DEPLOY / "systemd"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
ENTRYPOINT = DEPLOY / "docker-entrypoint.sh"
COMPOSE = DEPLOY / "compose.yaml"
UNITS = ("kerrigan.service", "kerrigan-worker.service", "kerrigan-runner.service")
BINARY = "/opt/kerrigan/bin/kerrigan"

# `kerrigan runner` (the agent on a runner host) is being added to the CLI. Until the parser has it, its name
# counts as known and its options go unchecked; once it is there, its command line is parsed like any other.
PENDING_SUBCOMMANDS = frozenset({"runner"})
# The runner host's variables, not (yet) in docs/configuration.md: the host's token, which the runner reads
# when --token is not given, and the server's URL, which kerrigan-runner.service passes as --server.
RUNNER_VARIABLES = frozenset({"KERRIGAN_RUNNER_TOKEN", "KERRIGAN_SERVER_URL"})
# What compose.yaml itself reads from deploy/.env, besides Kerrigan's settings.
COMPOSE_VARIABLES = frozenset({"POSTGRES_PASSWORD", "GITHUB_PRIVATE_KEY_FILE", "PUBLISHED_AT"})
# Sample values for what systemd and the shell fill in, so command lines can be parsed.
SAMPLE_VALUES = {"${KERRIGAN_SERVER_URL}": "https://kerrigan.example.com", "%H": "lab-a-01", "%S": "/var/lib"}


@pytest.fixture(scope="module")
def documented() -> frozenset[str]:
    """The ``KERRIGAN_`` settings docs/configuration.md documents."""
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    names = frozenset(re.findall(r"`(KERRIGAN_[A-Z0-9_]+)`", text))
    assert {"KERRIGAN_DATABASE_URL", "KERRIGAN_HOST", "KERRIGAN_GITHUB_APP_ID"} <= names, names
    return names


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    assert isinstance(services, dict)
    return services


def _environment(service: dict[str, Any]) -> dict[str, Any]:
    """A service's ``environment``, in either of compose's forms (a mapping, or a list of NAME=value)."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        return dict([*item.split("=", 1), None][:2] for item in environment)
    assert isinstance(environment, dict)
    return environment


def _assignments(path: Path) -> list[tuple[int, str, bool]]:
    """(line index, NAME, active) for each ``NAME=value`` line of an env file, and each ``#NAME=value``."""
    found = []
    for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if match := re.fullmatch(r"(#\s?)?([A-Z][A-Z0-9_]*)=.*", line.strip()):
            found.append((index, match.group(2), match.group(1) is None))
    return found


# --- compose.yaml -------------------------------------------------------------------------------------------


def test_compose_has_postgres_the_server_and_a_worker(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert set(services) == {"postgres", "settings", "kerrigan", "worker"}

    postgres = services["postgres"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert "pg_isready" in json.dumps(postgres["healthcheck"])
    volume = str(postgres["volumes"][0]).split(":")[0]
    assert volume in (compose.get("volumes") or {}), "the database lives in a named volume"

    for name in ("kerrigan", "worker"):
        service = services[name]
        build = service["build"]
        assert isinstance(build, dict)
        assert (COMPOSE.parent / build["context"]).resolve() == REPO
        assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE.resolve()
        depends_on = service["depends_on"]
        assert isinstance(depends_on, dict)
        assert depends_on["postgres"] == {"condition": "service_healthy"}
        environment = _environment(service)
        assert str(environment["KERRIGAN_DATABASE_URL"]).startswith("postgresql+asyncpg://kerrigan:")
        assert "@postgres:5432/kerrigan" in str(environment["KERRIGAN_DATABASE_URL"])
        assert environment["KERRIGAN_GITHUB_PRIVATE_KEY_PATH"] == "/run/secrets/github_private_key"
        assert "github_private_key" in service["secrets"]

    server, worker = services["kerrigan"], services["worker"]
    assert server["command"] == ["kerrigan", "serve"]
    # The default, 127.0.0.1, is unreachable through a published port.
    assert _environment(server)["KERRIGAN_HOST"] == "0.0.0.0"
    assert worker["command"] == ["kerrigan", "worker"]
    assert worker["depends_on"]["kerrigan"] == {"condition": "service_healthy"}
    assert worker["healthcheck"] == {"disable": True}, "a worker serves no /healthz"
    assert "ports" not in worker


def test_compose_environment_names_only_documented_settings(
    compose: dict[str, Any], documented: frozenset[str]
) -> None:
    for name, service in _services(compose).items():
        environment = _environment(service)
        undocumented = sorted(
            key for key in environment if key.startswith("KERRIGAN_") and key not in documented
        )
        assert not undocumented, f"service {name}: not in docs/configuration.md: {undocumented}"
        if name != "postgres":
            assert environment
            assert all(key.startswith("KERRIGAN_") for key in environment), (name, sorted(environment))


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def test_compose_reads_only_settings_and_its_own_variables(
    compose: dict[str, Any], documented: frozenset[str]
) -> None:
    text = "\n".join(_strings(compose))  # what compose interpolates: the values, not the comments
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used
    assert not used - documented - COMPOSE_VARIABLES, sorted(used - documented - COMPOSE_VARIABLES)
    required = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", text))
    assert {"KERRIGAN_GITHUB_APP_ID", "KERRIGAN_WEBHOOK_SECRET", "KERRIGAN_PUBLIC_URL"} <= required
    example = {name for _, name, _ in _assignments(DEPLOY / ".env.example")}
    assert required <= example, f"deploy/.env.example lacks {sorted(required - example)}"
    assert not example - documented - COMPOSE_VARIABLES, sorted(example - documented - COMPOSE_VARIABLES)


GENERATED = ("KERRIGAN_METRICS_TOKEN", "KERRIGAN_SECRETS_KEY", "KERRIGAN_SESSION_SECRET")
STATE = "/var/lib/kerrigan"  # the image's working directory, where every command reads kerrigan.env


def _interpolated(text: str, environ: dict[str, str]) -> str:
    """``${NAME:-default}`` and ``${NAME}`` as compose fills them in from ``environ``."""

    def fill(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3) or ""
        return environ.get(name) or default

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", fill, text)


def test_compose_makes_the_metrics_token_and_the_secrets_key_once_and_keeps_them(
    compose: dict[str, Any],
) -> None:
    services = _services(compose)
    settings = services["settings"]
    assert settings["command"] == ["kerrigan", "generate-settings"]  # into ./kerrigan.env, on the volume
    assert settings["restart"] == "no"
    assert not settings.get("secrets"), "it needs no GitHub key"
    # A value chosen in deploy/.env is the one kept; without one, a new one is made.
    assert {name: _environment(settings)[name] for name in GENERATED} == {
        name: f"${{{name}:-}}" for name in GENERATED
    }
    volume = f"kerrigan-settings:{STATE}"
    assert "kerrigan-settings" in compose["volumes"], "kept in a named volume, across restarts and rebuilds"
    for name in ("settings", "kerrigan", "worker"):
        assert volume in services[name]["volumes"], name
    assert services["kerrigan"]["depends_on"]["settings"] == {"condition": "service_completed_successfully"}
    for name in ("kerrigan", "worker"):
        # Set in the environment, even empty, a setting would win over the file's (docs/configuration.md).
        assert not set(GENERATED) & set(_environment(services[name])), name
    with_settings = {
        name for name, service in services.items() if "generate-settings" in str(service.get("command"))
    }
    assert with_settings == {"settings"}


def test_compose_publishes_the_server_on_loopback_unless_told_otherwise(compose: dict[str, Any]) -> None:
    services = _services(compose)
    published = {name: service["ports"] for name, service in services.items() if service.get("ports")}
    assert set(published) == {"kerrigan"}, "the worker and PostgreSQL are not published"
    (port,) = published["kerrigan"]
    assert _interpolated(port, {}) == "127.0.0.1:8080:8080"
    assert _interpolated(port, {"PUBLISHED_AT": "0.0.0.0:80"}) == "0.0.0.0:80:8080"
    text = COMPOSE.read_text(encoding="utf-8")
    assert "TLS" in text
    assert "PUBLISHED_AT" in (DEPLOY / ".env.example").read_text(encoding="utf-8")


# --- the env file examples ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allowed_extra"),
    [
        (DEPLOY / ".env.example", COMPOSE_VARIABLES),
        (SYSTEMD / "kerrigan.env.example", frozenset()),
        (SYSTEMD / "runner.env.example", RUNNER_VARIABLES),
    ],
    ids=lambda value: value.name if isinstance(value, Path) else "",
)
def test_env_examples_comment_every_variable_and_name_only_known_ones(
    path: Path, allowed_extra: frozenset[str], documented: frozenset[str]
) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    assignments = _assignments(path)
    assert assignments
    for index, name, _ in assignments:
        assert name in documented | allowed_extra, f"{path.name}:{index + 1}: {name} is not a known setting"
        # Walk up the paragraph: a prose comment must say what the variable is.
        above = index - 1
        while above >= 0 and lines[above].strip() and not _is_prose(lines[above]):
            above -= 1
        assert above >= 0, f"{path.name}:{index + 1}: {name} has no comment"
        assert _is_prose(lines[above]), f"{path.name}:{index + 1}: {name} has no comment"
    names = [name for _, name, _ in assignments]
    assert len(names) == len(set(names)), f"{path.name} names a variable twice"


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("#") and not re.fullmatch(r"#\s?[A-Z][A-Z0-9_]*=.*", stripped)


def test_env_examples_cover_every_documented_setting(documented: frozenset[str]) -> None:
    covered = {name for _, name, _ in _assignments(SYSTEMD / "kerrigan.env.example")}
    covered |= {name for _, name, _ in _assignments(SYSTEMD / "runner.env.example")}
    assert not documented - covered, f"add to deploy/systemd/*.env.example: {sorted(documented - covered)}"
    runner = {name for _, name, active in _assignments(SYSTEMD / "runner.env.example") if active}
    assert runner >= RUNNER_VARIABLES


# --- every `kerrigan ...` command line ----------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def _shell_commands(script: str) -> Iterator[list[str]]:
    """The simple commands of a shell script, as argv (``exec``, ``set --`` and ``then`` taken off)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    for part in re.split(r"&&|\|\||[;|\n]", "\n".join(lines)):
        argv = shlex.split(part)
        while argv and argv[0] in ("exec", "then", "else", "do"):
            argv = argv[1:]
        if argv[:2] == ["set", "--"]:
            argv = argv[2:]
        if argv:
            yield argv


def _exec_form_or_shell(arguments: str) -> Iterator[list[str]]:
    if arguments.startswith("["):
        yield json.loads(arguments)
    else:
        yield from _shell_commands(arguments)


def _dockerfile_commands() -> Iterator[list[str]]:
    for keyword, arguments in _dockerfile_instructions():
        if keyword in ("CMD", "ENTRYPOINT"):
            yield from _exec_form_or_shell(arguments)
        elif keyword == "RUN":
            yield from _exec_form_or_shell(re.sub(r"^(--\S+\s+)*", "", arguments))
        elif keyword == "HEALTHCHECK" and " CMD " in f" {arguments} ":
            yield from _exec_form_or_shell(arguments.split("CMD", 1)[1].strip())


def _unit_commands(name: str) -> Iterator[list[str]]:
    for key, value in _unit(name)["Service"]:
        if key.startswith("Exec"):
            yield shlex.split(value.lstrip("-@:+!"))


def _compose_commands() -> Iterator[list[str]]:
    for service in _services(yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))).values():
        command = service.get("command")
        if isinstance(command, str):
            yield shlex.split(command)
        elif command:
            yield [str(word) for word in command]


def _kerrigan_commands() -> list[tuple[str, list[str]]]:
    """(where, argv after ``kerrigan``) for each kerrigan command line in deploy/."""
    sources: list[tuple[str, Iterator[list[str]]]] = [
        ("Dockerfile", _dockerfile_commands()),
        ("docker-entrypoint.sh", _shell_commands(ENTRYPOINT.read_text(encoding="utf-8"))),
        ("compose.yaml", _compose_commands()),
        *((name, _unit_commands(name)) for name in UNITS),
    ]
    return [
        (where, argv[1:])
        for where, commands in sources
        for argv in commands
        if Path(argv[0]).name == "kerrigan"
    ]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_deploy_runs_the_commands_it_should() -> None:
    """The extraction below finds what deploy/ is meant to run, so the next test cannot pass on nothing."""
    found = {
        (where, " ".join(argv[:2] if argv[:1] == ["db"] else argv[:1]))
        for where, argv in _kerrigan_commands()
    }
    assert {
        ("Dockerfile", "serve"),
        ("docker-entrypoint.sh", "db upgrade"),
        ("compose.yaml", "serve"),
        ("compose.yaml", "worker"),
        ("compose.yaml", "generate-settings"),
        ("kerrigan.service", "generate-settings"),
        ("kerrigan.service", "db upgrade"),
        ("kerrigan.service", "serve"),
        ("kerrigan-worker.service", "worker"),
        ("kerrigan-runner.service", "runner"),
    } <= found, sorted(found)


def test_every_kerrigan_command_in_deploy_is_a_real_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    known = set(_subparsers(parser))
    assert {"serve", "worker", "db"} <= known  # the parser was read, not an empty stand-in
    problems = []
    for where, written in _kerrigan_commands():
        argv = [SAMPLE_VALUES.get(word, word) for word in written]
        subcommand = next((word for word in argv if not word.startswith("-")), None)
        if subcommand is None:  # only options, such as `kerrigan --version` after installing
            unknown = [word for word in argv if word not in parser._option_string_actions]
            if unknown:
                problems.append(f"{where}: kerrigan {shlex.join(argv)}: no such option {unknown}")
            continue
        if subcommand not in known:
            if subcommand not in PENDING_SUBCOMMANDS:
                problems.append(f"{where}: kerrigan {shlex.join(argv)}: no subcommand {subcommand!r}")
            continue
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            error = capsys.readouterr().err.strip().splitlines()
            problems.append(f"{where}: kerrigan {shlex.join(argv)}: exit {exc.code}: {error[-1:]}")
    assert not problems, "\n".join(problems)


# --- the image ----------------------------------------------------------------------------------------------


def test_dockerfile_builds_a_wheel_and_runs_it_as_a_non_root_user() -> None:
    instructions = _dockerfile_instructions()
    text = DOCKERFILE.read_text(encoding="utf-8")
    stages = [arguments for keyword, arguments in instructions if keyword == "FROM"]
    assert len(stages) >= 2, "multi-stage: build the wheel, then install it"
    # The image's Python is pinned to a release whose tarfile has the 2025 extraction-filter fixes (the
    # runner does not rely on them, so requires-python admits any 3.11: tests/unit/test_install.py).
    image = re.search(r"^ARG PYTHON_IMAGE=python:(\d+)\.(\d+)\.(\d+)-slim$", text, re.MULTILINE)
    assert image, "ARG PYTHON_IMAGE pins a patch release: python:X.Y.Z-slim"
    assert all(stage.startswith("${PYTHON_IMAGE}") for stage in stages)
    assert tuple(int(part) for part in image.groups()) >= (3, 11, 13)
    assert any(keyword == "RUN" and "pip wheel" in arguments for keyword, arguments in instructions)
    users = [arguments for keyword, arguments in instructions if keyword == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("root", "0")
    assert ("EXPOSE", "8080") in instructions
    healthchecks = [arguments for keyword, arguments in instructions if keyword == "HEALTHCHECK"]
    assert healthchecks
    assert "/healthz" in healthchecks[-1]
    entrypoint = [json.loads(arguments) for keyword, arguments in instructions if keyword == "ENTRYPOINT"]
    assert entrypoint[-1] == ["docker-entrypoint.sh"]
    cmd = [json.loads(arguments) for keyword, arguments in instructions if keyword == "CMD"]
    assert cmd[-1] == ["kerrigan", "serve"]
    env = " ".join(arguments for keyword, arguments in instructions if keyword == "ENV")
    assert "KERRIGAN_HOST=0.0.0.0" in env


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """(exclude, regex) per line, as Docker reads a .dockerignore file."""
    patterns = []
    for raw in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclude = not line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        regex, index = "", 0
        while index < len(pattern):
            if pattern.startswith("**/", index):
                regex, index = regex + "(?:.*/)?", index + 3
            elif pattern.startswith("**", index):
                regex, index = regex + ".*", index + 2
            elif pattern[index] == "*":
                regex, index = regex + "[^/]*", index + 1
            elif pattern[index] == "?":
                regex, index = regex + "[^/]", index + 1
            else:
                regex, index = regex + re.escape(pattern[index]), index + 1
        patterns.append((exclude, re.compile(regex)))
    return patterns


def _sent_to_docker(path: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: length + 1]) for length in range(len(parts))]
    excluded = False
    for exclude, regex in patterns:
        if any(regex.fullmatch(candidate) for candidate in candidates):
            excluded = exclude
    return not excluded


def test_dockerignore_sends_what_the_build_copies_and_nothing_local() -> None:
    patterns = _dockerignore_patterns()
    copied = []
    for keyword, arguments in _dockerfile_instructions():
        if keyword in ("COPY", "ADD"):
            words = shlex.split(arguments)
            if any(word.startswith("--from") for word in words):
                continue
            sources = [word for word in words if not word.startswith("--")][:-1]
            for source in sources:
                assert (REPO / source).exists(), f"COPY {source}: no such path in the repository"
                root = REPO / source
                files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
                copied += [
                    p.relative_to(REPO).as_posix()
                    for p in files
                    if "__pycache__" not in p.parts and p.suffix != ".pyc"
                ]
    assert "pyproject.toml" in copied
    assert "README.md" in copied  # hatchling reads it: pyproject.toml names it as the readme
    assert "src/kerrigan/store/migrations/env.py" in copied
    assert "deploy/docker-entrypoint.sh" in copied
    left_out = [path for path in copied if not _sent_to_docker(path, patterns)]
    assert not left_out, f"COPY'd but excluded by {DOCKERIGNORE.name}: {left_out[:5]}"
    for local in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/conftest.py",
        "kerrigan.db",
        "deploy/.env",
        "deploy/github-app.pem",
        "src/kerrigan/__pycache__/cli.cpython-311.pyc",
        "src/kerrigan/.ruff_cache/x",
    ):
        assert not _sent_to_docker(local, patterns), f"{local} would be sent to the build"


def _run_entrypoint(tmp_path: Path, *argv: str, upgrade_status: int = 0) -> tuple[int, list[str]]:
    """Run the entry point with a stand-in ``kerrigan`` that logs how it was called."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    log.write_text("")
    fake = bin_dir / "kerrigan"
    fake.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            echo "$*" >> {shlex.quote(str(log))}
            if [ "$*" = "db upgrade" ]; then exit {upgrade_status}; fi
            """)
    )
    fake.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["/bin/sh", str(ENTRYPOINT), *argv], env=environ, capture_output=True, check=False, timeout=30
    )
    return done.returncode, log.read_text().splitlines()


@pytest.mark.skipif(not Path("/bin/sh").exists(), reason="no /bin/sh to run the entry point with")
def test_entrypoint_upgrades_the_database_before_serving(tmp_path: Path) -> None:
    assert os.access(ENTRYPOINT, os.X_OK), "the entry point must be executable"
    assert ENTRYPOINT.read_text(encoding="utf-8").startswith("#!/bin/sh\n")
    assert _run_entrypoint(tmp_path, "kerrigan", "serve") == (0, ["db upgrade", "serve"])
    assert _run_entrypoint(tmp_path) == (0, ["db upgrade", "serve"])
    # Only the server migrates: several containers migrating at once would race.
    assert _run_entrypoint(tmp_path, "kerrigan", "worker") == (0, ["worker"])
    assert _run_entrypoint(tmp_path, "kerrigan", "inventory", "export") == (0, ["inventory export"])
    status, calls = _run_entrypoint(tmp_path, "kerrigan", "serve", upgrade_status=3)
    assert status != 0
    assert calls == ["db upgrade"], "a failed upgrade must not start the server"


# --- the systemd units --------------------------------------------------------------------------------------


def _unit(name: str) -> dict[str, list[tuple[str, str]]]:
    """The sections of a unit file, each a list of (key, value) in order (keys may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    path = SYSTEMD / name
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if match := re.fullmatch(r"\[([A-Za-z]+)\]", line):
            assert match.group(1) not in sections, f"{name}:{number}: [{match.group(1)}] twice"
            current = sections.setdefault(match.group(1), [])
            continue
        key, equals, value = line.partition("=")
        assert equals, f"{name}:{number}: not KEY=value: {raw!r}"
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", key.strip()), f"{name}:{number}: bad key {key!r}"
        assert current is not None, f"{name}:{number}: a setting before any [Section]"
        current.append((key.strip(), value.strip()))
    assert not pending, f"{name} ends inside a continued line"
    return sections


def _values(name: str, section: str, key: str) -> list[str]:
    return [value for k, value in _unit(name).get(section, []) if k == key]


@pytest.mark.parametrize("name", UNITS)
def test_unit_files_parse_with_one_exec_start(name: str) -> None:
    unit = _unit(name)
    assert set(unit) == {"Unit", "Service", "Install"}
    assert _values(name, "Unit", "Description")
    starts = _values(name, "Service", "ExecStart")
    assert len(starts) == 1, starts
    assert shlex.split(starts[0])[0] == BINARY
    assert _values(name, "Install", "WantedBy")


EXPECTED: dict[str, dict[str, str | list[str]]] = {
    "kerrigan.service": {
        "User": "kerrigan",
        "EnvironmentFile": "/etc/kerrigan/kerrigan.env",
        # The secrets key, metrics token and session secret this file leaves unset: made once, in the state
        # directory's kerrigan.env (the working directory's, which every command reads), and kept.
        "ExecStartPre": [f"{BINARY} generate-settings", f"{BINARY} db upgrade"],
        "ExecStart": f"{BINARY} serve",
        "StateDirectory": "kerrigan",
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
    },
    "kerrigan-worker.service": {
        "User": "kerrigan",
        "EnvironmentFile": "/etc/kerrigan/kerrigan.env",
        "ExecStart": f"{BINARY} worker",
        "ProtectSystem": "strict",
        "NoNewPrivileges": "yes",
    },
    "kerrigan-runner.service": {
        # Root, so each job runs as a user of its own in its own cgroup; jobs never run as root.
        "User": "root",
        "EnvironmentFile": "/etc/kerrigan/runner.env",
        "ExecStart": f"{BINARY} runner --server ${{KERRIGAN_SERVER_URL}} --host-id %H "
        "--work-dir /var/lib/kerrigan-runner",
        "StateDirectory": "kerrigan-runner",
        # The agent SIGTERMs its jobs' process groups, then SIGKILLs them after a grace period: SIGTERM must
        # reach it alone, and it must have the time to finish.
        "KillMode": "mixed",
        "TimeoutStopSec": "60",
        "Restart": "always",
        "Delegate": "yes",  # its jobs' cgroups: CPUs, memory cap, killed whole at the job's end
    },
}


@pytest.mark.parametrize("name", UNITS)
def test_unit_settings(name: str) -> None:
    for key, expected in EXPECTED[name].items():
        assert _values(name, "Service", key) == (expected if isinstance(expected, list) else [expected]), key


def test_the_worker_reads_the_settings_the_server_made() -> None:
    for name in ("kerrigan.service", "kerrigan-worker.service"):
        assert _values(name, "Service", "WorkingDirectory") == ["%S/kerrigan"], name


@pytest.mark.parametrize("name", UNITS)
def test_unit_variables_are_in_the_example_of_its_environment_file(name: str) -> None:
    (environment_file,) = _values(name, "Service", "EnvironmentFile")
    assert environment_file.startswith("/etc/kerrigan/")
    example = SYSTEMD / (Path(environment_file).name + ".example")
    assert example.exists(), f"{name} reads {environment_file}: no {example.name} to copy it from"
    set_there = {variable for _, variable, active in _assignments(example) if active}
    used = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", " ".join(v for _, v in _unit(name)["Service"])))
    assert used <= set_there, f"{name} uses {sorted(used - set_there)}, which {example.name} does not set"


def test_worker_unit_follows_the_server() -> None:
    assert _values("kerrigan-worker.service", "Unit", "PartOf") == ["kerrigan.service"]
    assert "kerrigan.service" in " ".join(_values("kerrigan-worker.service", "Unit", "After")).split()


def test_runner_stops_its_jobs_before_systemd_kills_them() -> None:
    (timeout,) = _values("kerrigan-runner.service", "Service", "TimeoutStopSec")
    (start,) = _values("kerrigan-runner.service", "Service", "ExecStart")
    parser = build_parser()
    if "runner" not in _subparsers(parser):
        pytest.skip("`kerrigan runner` is not in the CLI yet: its grace period cannot be read")
    argv = [SAMPLE_VALUES.get(word, word) for word in shlex.split(start)[1:]]
    grace = getattr(parser.parse_args(argv), "kill_grace_s", None)
    if grace is None:
        pytest.skip("`kerrigan runner` has no --kill-grace-s")
    assert grace < int(timeout), f"--kill-grace-s {grace} leaves systemd to SIGKILL jobs the agent is ending"


# Jobs on a runner host flash, power-cycle and talk to boards over USB and serial ports, with the host's
# tools (some through sudo): the sandboxing that suits the server would break them.
RUNNER_FORBIDDEN = (
    "PrivateDevices",
    "DevicePolicy",
    "DeviceAllow",
    "ProtectSystem",
    "ProtectHome",
    "DynamicUser",
    "PrivateTmp",
    "NoNewPrivileges",
)


def test_runner_unit_leaves_devices_and_the_system_to_jobs() -> None:
    keys = {key for key, _ in _unit("kerrigan-runner.service")["Service"]}
    assert not keys & set(RUNNER_FORBIDDEN), sorted(keys & set(RUNNER_FORBIDDEN))


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed: the units are checked by the parser above only")
    return found


def _units_with_a_binary(tmp_path: Path) -> list[Path]:
    """The units in tmp_path, with ExecStart's /opt/kerrigan/bin/kerrigan pointing at an executable there.

    systemd-analyze checks that the binary exists; /opt/kerrigan is where a host installs Kerrigan, not here.
    """
    binary = tmp_path / "bin" / "kerrigan"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    copies = []
    for name in UNITS:
        copy = tmp_path / name
        copy.write_text((SYSTEMD / name).read_text(encoding="utf-8").replace(BINARY, str(binary)))
        copies.append(copy)
    return copies


def _verify(analyze: str, files: list[Path]) -> tuple[int, str]:
    done = subprocess.run(
        [analyze, "verify", "--man=no", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=files[0].parent,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    analyze = _systemd_analyze()
    # A control unit first: if verify complains about a unit known to be good, it cannot run meaningfully in
    # this environment (no /proc, a broken unit search path, ...), and its verdict on ours would mean nothing.
    control = tmp_path / "control" / "control.service"
    control.parent.mkdir()
    control.write_text(
        "[Unit]\nDescription=control\nWants=network-online.target\nAfter=network-online.target\n\n"
        "[Service]\nExecStart=/bin/sh -c true\n\n[Install]\nWantedBy=multi-user.target\n"
    )
    status, output = _verify(analyze, [control])
    if status != 0 or output:
        pytest.skip(f"systemd-analyze verify fails on a known-good unit here (exit {status}): {output[:300]}")
    # verify exits 0 on unknown keys and unparsable values ("..., ignoring"): any output is a failure.
    status, output = _verify(analyze, _units_with_a_binary(tmp_path))
    assert status == 0
    assert not output, output


@pytest.mark.parametrize("name", ["kerrigan.service", "kerrigan-worker.service"])
def test_server_units_stay_hardened(tmp_path: Path, name: str) -> None:
    analyze = _systemd_analyze()
    copy = next(path for path in _units_with_a_binary(tmp_path) if path.name == name)
    # Exposure is scored 0 (locked down) to 10; --threshold takes tenths. The units are at 1.4 today.
    done = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=20", "--no-pager", str(copy)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if "--offline" in done.stderr and "unrecognized" in done.stderr:
        pytest.skip(f"this systemd-analyze cannot score unit files offline: {done.stderr.strip()[:200]}")
    overall = [line for line in done.stdout.splitlines() if "Overall exposure" in line]
    assert done.returncode == 0, overall or done.stderr
