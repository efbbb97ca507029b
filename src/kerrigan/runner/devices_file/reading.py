"""Reading a devices file: every device's ``present_if``, ``env``, ``secret_env``, ``holder_sees`` and
wiring (:mod:`~kerrigan.runner.devices_file.wiring_reading`), checked; a mistake is a
:class:`DevicesFileError` naming the file, line and field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from kerrigan.core.masking import MIN_SECRET_BYTES
from kerrigan.core.quoting import quote
from kerrigan.core.runner_fields import MAX_SETTINGS, MAX_TEXT
from kerrigan.core.yamlsource import SourceReader, describe, is_null, join_field
from kerrigan.runner.devices_file.argv import read_argv
from kerrigan.runner.devices_file.host_view import THIS_HOST, HostView
from kerrigan.runner.devices_file.wiring import NO_WIRING, Wiring
from kerrigan.runner.devices_file.wiring_reading import WIRING_KEYS, read_wiring

DEFAULT_TIMEOUT_S: Final = 10
MAX_TIMEOUT_S: Final = 120


MAX_NODES: Final = 100_000  # keys and values in the file, aliases expanded
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What the agent sets in every job's environment itself (kerrigan.runner.processes: job_environment, and
# HOME, USER, LOGNAME and TMPDIR for a job run as its own user): a device's env may not set these.
AGENT_ENV: Final = frozenset(
    {
        "CI",
        "KERRIGAN",
        "KERRIGAN_SESSION_ID",
        "KERRIGAN_TASK_ID",
        "KERRIGAN_DEVICE_ID",
        "KERRIGAN_DEVICE_BOARD",
        "KERRIGAN_DEVICE_LABELS",
        "KERRIGAN_CPUS",
        "KERRIGAN_WORKFLOW_RUN_ID",
        "KERRIGAN_BOOT_SECONDS",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
    }
)
# KERRIGAN_DEVICE_ and KERRIGAN_DEVICES_: a gang's devices by role (KERRIGAN_DEVICE_DUT_ID, ...).
AGENT_ENV_PREFIXES: Final = ("KERRIGAN_JOB_", "GITHUB_", "KERRIGAN_DEVICE_", "KERRIGAN_DEVICES_")


class DevicesFileError(ValueError):
    """The devices file cannot be used: one line naming the file and the (first) problem."""


@dataclass(frozen=True, slots=True)
class PathCheck:
    """Present while ``path`` exists (a symbolic link: while what it points to exists)."""

    path: str


@dataclass(frozen=True, slots=True)
class CommandCheck:
    """Present when ``argv`` (run without a shell) exits 0 within ``timeout_s``."""

    argv: tuple[str, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S


PresentIf = PathCheck | CommandCheck


@dataclass(frozen=True, slots=True)
class DeviceEntry:
    """One device of the file: how it is found (None: always present), its jobs' private settings, and how
    the agent reaches its board (its wiring: the agent's alone, never a job's)."""

    present_if: PresentIf | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    # The names of ``env`` shown to the person holding a reservation of the device (None: all of them).
    holder_sees: tuple[str, ...] | None = None
    # Only for jobs that may have secrets, masked like them; never in a ``repr``.
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    wiring: Wiring = NO_WIRING

    @property
    def holder_settings(self) -> dict[str, str]:
        """The settings the person holding a reservation of the device is shown."""
        names = self.env if self.holder_sees is None else self.holder_sees
        return {name: self.env[name] for name in names}


@dataclass(frozen=True, slots=True)
class DevicesFile:
    """A devices file, read: its path (as given) and its devices by id."""

    path: str
    devices: Mapping[str, DeviceEntry]


# -- reading the file ------------------------------------------------------------------------------------


def load_devices_file(path: Path, host: HostView = THIS_HOST) -> DevicesFile:
    """Read and check the devices file at ``path`` against ``host``; :class:`DevicesFileError` when it
    cannot be used."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DevicesFileError(f"devices file {path}: no such file") from None
    except IsADirectoryError:
        raise DevicesFileError(f"devices file {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise DevicesFileError(f"devices file {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise DevicesFileError(f"devices file {path}: {exc.strerror}") from None
    return parse_devices_file(text, str(path), host)


def parse_devices_file(text: str, file: str, host: HostView = THIS_HOST) -> DevicesFile:
    """Check a devices file's text, its wiring against what ``host`` has (a console's port, labgrid's power
    backends); ``file`` names it in the error. Every problem is found, the first (in the order of the file)
    is raised, with how many more there are."""
    reader = SourceReader(file)
    devices = _read(reader, text, host)
    errors = reader.sorted_errors()
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise DevicesFileError(f"{errors[0]}{more}")
    return DevicesFile(file, devices)


def _read(r: SourceReader, text: str, host: HostView) -> dict[str, DeviceEntry]:
    root = r.compose(text, "devices file", max_nodes=MAX_NODES)
    top = r.mapping(root, "", ("devices",)) if root is not None else None
    if top is None:
        return {}
    if "devices" not in top:
        r.error(root, "devices", "the devices file needs a 'devices' mapping of device id to its settings")
        return {}
    entries = r.mapping(top["devices"][1], "devices")
    devices = {}
    for device_id, (key_node, node) in (entries or {}).items():
        where = join_field("devices", device_id)
        if not device_id.strip():
            r.error(key_node, where, "a device id must not be empty")
            continue
        entry = _device(r, node, where, host)
        if entry is not None:
            devices[device_id] = entry
    return devices


def _device(r: SourceReader, node: yaml.Node, where: str, host: HostView) -> DeviceEntry | None:
    entries = r.mapping(node, where, ("present_if", "env", "secret_env", "holder_sees", *WIRING_KEYS))
    if entries is None:
        return None
    present_if = None
    if "present_if" in entries:
        present_if = _present_if(r, entries["present_if"][1], join_field(where, "present_if"))
    env_field = join_field(where, "env")
    env, value_nodes = _env(r, entries["env"][1], env_field) if "env" in entries else ({}, {})
    secret_env = {}
    if "secret_env" in entries:
        secret_env = _secret_env(r, entries["secret_env"][1], join_field(where, "secret_env"), env)
    holder_sees = None
    if "holder_sees" in entries:
        holder_sees = _holder_sees(
            r, entries["holder_sees"][1], join_field(where, "holder_sees"), env, secret_env
        )
    wiring = read_wiring(r, entries, where, _there(entries, present_if, host), host)
    entry = DeviceEntry(present_if, env, holder_sees, secret_env, wiring)
    # What the holder is shown goes to the server, whose limits are the runner protocol's: found here, in
    # the file, rather than as a refusal the holder would only see as settings that never come.
    shown = entry.holder_settings
    if len(shown) > MAX_SETTINGS:
        key = "holder_sees" if "holder_sees" in entries else "env"
        r.error(
            entries[key][1],
            join_field(where, key),
            f"a reservation's holder is shown at most {MAX_SETTINGS} settings, not "
            f"{len(shown)}; list those to show in holder_sees",
        )
    for name, value in shown.items():
        if len(value) > MAX_TEXT:
            r.error(
                value_nodes[name],
                join_field(env_field, name),
                f"is shown to a reservation's holder, "
                f"who is shown at most {MAX_TEXT} characters a setting; leave it out of holder_sees",
            )
    return entry


def _there(
    entries: Mapping[str, tuple[yaml.Node, yaml.Node]], present_if: PresentIf | None, host: HostView
) -> str | None:
    """Why a device with a serial console is there now, so that its port must be (None: it is not, or a
    command would say, which is not run at start; and for a device without one, not looked at)."""
    if "console" not in entries:
        return None
    if "present_if" not in entries:
        return "and the device has no present_if: it is taken to be there"
    if isinstance(present_if, PathCheck) and host.exists(present_if.path):
        return f"though its present_if {present_if.path} exists"
    return None


def _holder_sees(
    r: SourceReader, node: yaml.Node, where: str, env: Mapping[str, str], secret_env: Mapping[str, str]
) -> tuple[str, ...]:
    """Which of ``env`` a reservation's holder is shown: a list of its names (``[]``: none)."""
    names: dict[str, None] = {}
    for item, item_field, name in r.strings(node, where, scalar_ok=False):
        if name in secret_env:
            r.error(
                item,
                item_field,
                f"{quote(name)} is a secret_env name: a reservation's holder is never shown those",
            )
        elif name not in env:
            r.error(item, item_field, f"{quote(name)} is not one of this device's env names")
        elif name in names:
            r.error(item, item_field, f"{quote(name)} is listed twice")
        else:
            names[name] = None
    return tuple(names)


def _present_if(r: SourceReader, node: yaml.Node, where: str) -> PresentIf | None:
    if isinstance(node, yaml.ScalarNode) and not is_null(node):
        path = r.string(node, where)
        if path is None:
            return None
        if not path.startswith("/"):
            r.error(node, where, f"must be an absolute path, not {quote(path)}")
            return None
        if "\0" in path:
            r.error(node, where, "must not hold a NUL character")
            return None
        return PathCheck(path)
    if not isinstance(node, yaml.MappingNode):
        r.error(node, where, f"must be a path or {{command: [...], timeout_s: N}}, not {describe(node)}")
        return None
    entries = r.mapping(node, where, ("command", "timeout_s"))
    if entries is None:
        return None
    if "command" not in entries:
        r.error(node, join_field(where, "command"), "is required: the command and its arguments, as a list")
        return None
    argv = read_argv(r, entries["command"][1], join_field(where, "command"))
    if argv is None:
        return None
    timeout_s = DEFAULT_TIMEOUT_S
    if "timeout_s" in entries:
        found = r.integer(
            entries["timeout_s"][1], join_field(where, "timeout_s"), minimum=1, maximum=MAX_TIMEOUT_S
        )
        if found is None:
            return None
        timeout_s = found
    return CommandCheck(argv, timeout_s)


def _env(r: SourceReader, node: yaml.Node, where: str) -> tuple[dict[str, str], dict[str, yaml.Node]]:
    """The env's names to values, and to the nodes of the values (for errors found later)."""
    entries = r.mapping(node, where)
    env = {}
    nodes: dict[str, yaml.Node] = {}
    for name, (key_node, value_node) in (entries or {}).items():
        name_field = join_field(where, name)
        problem = env_name_problem(name)
        if problem is not None:
            r.error(key_node, name_field, problem)
            continue
        value = r.string(value_node, name_field, allow_empty=True)
        if value is None:
            continue
        if "\0" in value:
            r.error(value_node, name_field, "must not hold a NUL character")
            continue
        env[name] = value
        nodes[name] = value_node
    return env, nodes


def _secret_env(r: SourceReader, node: yaml.Node, where: str, env: Mapping[str, str]) -> dict[str, str]:
    """The secret settings' names to values: named as ``env``'s are, not also in ``env``, each long enough
    to be masked. A problem names the setting and its size, never its value."""
    entries = r.mapping(node, where)
    found = {}
    for name, (key_node, value_node) in (entries or {}).items():
        name_field = join_field(where, name)
        problem = env_name_problem(name)
        if problem is None and name in env:
            problem = f"{quote(name)} is in env too: a setting is either for every job (env) or secret"
        if problem is not None:
            r.error(key_node, name_field, problem)
            continue
        value = r.string(value_node, name_field)
        if value is None:
            continue
        if "\0" in value:
            r.error(value_node, name_field, "must not hold a NUL character")
            continue
        size = len(value.encode("utf-8"))
        if size < MIN_SECRET_BYTES:
            r.error(
                value_node,
                name_field,
                f"is {size} bytes long; a secret setting needs at least {MIN_SECRET_BYTES}, or it could "
                "not be masked in a job's output",
            )
            continue
        found[name] = value
    return found


def env_name_problem(name: str) -> str | None:
    """Why ``name`` may not be set in a device's env (None: it may)."""
    if _ENV_NAME.fullmatch(name) is None:
        return f"{quote(name)} is not an environment variable name (letters, digits and _, not first a digit)"
    if name in AGENT_ENV:
        return f"the agent sets {name} itself, for every job; choose another name"
    for prefix in AGENT_ENV_PREFIXES:
        if name.startswith(prefix):
            return f"names starting {prefix} are the agent's own, for every job; choose another name"
    return None
