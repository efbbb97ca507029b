"""``kerrigan runner`` (the agent on a runner host) and ``kerrigan runner topology``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerrigan.cli.logs import configure_logging
from kerrigan.cli.usage import UsageError, port_number
from kerrigan.core.disk import DEFAULT_FLOOR_BYTES

if TYPE_CHECKING:
    from kerrigan.runner.settings import AgentSettings


def _claims(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of vCPU counts") from None


def _runner_topology(args: argparse.Namespace) -> int:
    from kerrigan.core.cpus import render_topology_report, topology_report
    from kerrigan.runner.topology import TopologyError, read_topology

    try:
        topology = read_topology(Path(args.sysfs_root))
    except TopologyError as exc:
        raise UsageError(str(exc)) from None
    report = topology_report(topology, args.claims)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_topology_report(report))
    return 0


def _group_ids(text: str) -> tuple[int, ...]:
    """``dialout,plugdev`` (names or ids) as gids; a ValueError naming an unknown group."""
    import grp

    found = []
    for name in filter(None, (part.strip() for part in text.split(","))):
        if name.isascii() and name.isdigit():
            found.append(int(name))
            continue
        try:
            found.append(grp.getgrnam(name).gr_gid)
        except KeyError:
            raise ValueError(f"--job-groups: no group {name!r} on this host") from None
    return tuple(found)


def _metrics_fields(args: argparse.Namespace) -> dict[str, Any]:
    """``--metrics-host``/``--metrics-port`` as AgentSettings fields, only those given (the agent's own
    defaults hold otherwise)."""
    fields: dict[str, Any] = {}
    if args.metrics_host is not None:
        fields["metrics_host"] = args.metrics_host
    if args.metrics_port is not None:
        fields["metrics_port"] = port_number(args.metrics_port, "--metrics-port", least=0)
    return fields


def _agent_settings(args: argparse.Namespace) -> AgentSettings:
    """The agent's settings from its flags (and KERRIGAN_RUNNER_TOKEN); a UsageError naming a bad one."""
    from kerrigan.core.disk import DiskPolicy
    from kerrigan.core.host_capacity import HostLimits
    from kerrigan.core.unpacking import UnpackLimits
    from kerrigan.runner.devices_file import load_devices_file
    from kerrigan.runner.isolation.users import UserRange
    from kerrigan.runner.settings import OUTPUT_MAX_LEAST, AgentSettings

    token = args.token or os.environ.get("KERRIGAN_RUNNER_TOKEN", "")
    missing = [name for name, value in (("--server", args.server), ("--host-id", args.host_id)) if not value]
    if not token:
        missing.append("--token (or KERRIGAN_RUNNER_TOKEN)")
    if missing:
        raise UsageError(f"missing {', '.join(missing)}")
    for flag, number in (
        ("--unpack-max-bytes", args.unpack_max_bytes),
        ("--unpack-max-files", args.unpack_max_files),
    ):
        if number < 1:
            raise UsageError(f"{flag} must be 1 or more, not {number}")
    if args.output_max_bytes < OUTPUT_MAX_LEAST:
        raise UsageError(
            f"--output-max-bytes must be {OUTPUT_MAX_LEAST} or more, not {args.output_max_bytes}"
        )
    try:
        return AgentSettings(
            server_url=args.server,
            token=token,
            host_id=args.host_id,
            work_dir=Path(args.work_dir),
            limits=HostLimits(args.max_weight, args.max_queue_depth),
            disk=DiskPolicy(args.free_space_floor_bytes),
            sysfs_root=Path(args.sysfs_root),
            kill_grace_s=args.kill_grace_s,
            systemd_scope=args.systemd_scope,
            isolation=args.isolation,
            job_users=UserRange.parse(args.job_users),
            job_groups=_group_ids(args.job_groups),
            unpack_limits=UnpackLimits(args.unpack_max_bytes, args.unpack_max_files),
            output_max_bytes=args.output_max_bytes,
            github_retry_s=args.github_retry_s,
            # A DevicesFileError is a ValueError: one line naming the file, its line and field.
            devices_file=load_devices_file(Path(args.devices_file)) if args.devices_file else None,
            **_metrics_fields(args),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_consoles(settings: AgentSettings) -> None:
    """A devices file with serial or URL consoles needs pyserial: refused at start, in one line."""
    from kerrigan.runner.boards.console import console_support_problem

    problem = console_support_problem(settings.devices_file)
    if problem is not None:
        raise UsageError(problem)


def _runner(args: argparse.Namespace) -> int:
    if args.runner_command == "topology":
        return _runner_topology(args)
    import aiohttp

    from kerrigan.runner.agent import Agent, not_dumpable
    from kerrigan.runner.isolation.own_files import OwnFilesWritableError
    from kerrigan.runner.isolation.probe import IsolationUnavailableError
    from kerrigan.runner.isolation.range_lock import RangeLockError
    from kerrigan.runner.metrics import MetricsAddressError
    from kerrigan.runner.server import ServerRefused, ServerUnavailable, TokenRefused
    from kerrigan.runner.topology import TopologyError

    settings = _agent_settings(args)
    _check_consoles(settings)
    configure_logging(args)
    if args.token:
        logging.getLogger("kerrigan.runner").warning(
            "--token shows in this host's process list (ps, /proc/<pid>/cmdline) to its other users: "
            "give it in KERRIGAN_RUNNER_TOKEN instead"
        )
    # Where jobs cannot run as users of their own they run as this one: then they must not read the token
    # from /proc/<agent>/environ.
    not_dumpable()

    async def work() -> int:
        async with aiohttp.ClientSession() as http:
            try:
                agent = Agent(settings, http)
            except TopologyError as exc:
                raise UsageError(f"cannot read the CPU topology: {exc}") from None
            except IsolationUnavailableError as exc:
                raise UsageError(f"--isolation require: {exc}") from None
            task = asyncio.current_task()
            assert task is not None
            loop = asyncio.get_running_loop()
            for signal_number in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signal_number, task.cancel)
            try:
                await agent.run()
            except TokenRefused as exc:  # revoked or replaced, at start or while it ran
                raise UsageError(f"the server refused this host's token: {exc}") from None
            except ServerRefused as exc:
                raise UsageError(f"the server refused the runner: {exc}") from None
            except ServerUnavailable as exc:
                raise UsageError(f"the server cannot be reached: {exc}") from None
            except (MetricsAddressError, RangeLockError, OwnFilesWritableError) as exc:
                raise UsageError(str(exc)) from None
            except asyncio.CancelledError:
                log_stop = logging.getLogger("kerrigan.runner")
                log_stop.info("stopped")
        return 0

    return asyncio.run(work())


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan runner`` and ``kerrigan runner topology``."""
    runner_cmd = commands.add_parser(
        "runner",
        help="run the runner agent on a runner host (or: runner topology)",
        description="Take offered jobs for this host's devices from the server and run them.",
    )
    runner_cmd.add_argument("--server", help="the Kerrigan server's base URL")
    runner_cmd.add_argument("--token", help="this host's token (default: $KERRIGAN_RUNNER_TOKEN)")
    runner_cmd.add_argument("--host-id", help="this host's id, as `kerrigan runners create` named it")
    runner_cmd.add_argument(
        "--work-dir", default="./kerrigan-runner", help="workspaces, sources, job records"
    )
    runner_cmd.add_argument("--max-weight", type=int, default=28, help="vCPUs claimed by jobs at once")
    runner_cmd.add_argument(
        "--max-queue-depth", type=int, default=64, help="jobs accepted and not yet running"
    )
    runner_cmd.add_argument(
        "--free-space-floor-bytes",
        type=int,
        default=DEFAULT_FLOOR_BYTES,
        help="refuse jobs below this (default 8 GiB; 0: off)",
    )
    runner_cmd.add_argument("--kill-grace-s", type=float, default=10.0, help="SIGTERM to SIGKILL")
    runner_cmd.add_argument(
        "--github-retry-s",
        type=float,
        default=300.0,
        help="how long a tarball download keeps retrying GitHub's passing errors before the job fails",
    )
    runner_cmd.add_argument(
        "--systemd-scope",
        choices=("auto", "always", "never"),
        default="auto",
        help="pin jobs with systemd-run --scope -p AllowedCPUs= (auto: when root under systemd)",
    )
    runner_cmd.add_argument(
        "--isolation",
        choices=("auto", "require", "off"),
        default="auto",
        help="run each job as its own user with a private /tmp in its own cgroup (auto: what the host "
        "allows; require: refuse to start without it; off: as the agent's user)",
    )
    runner_cmd.add_argument(
        "--job-users", default="61000-61183", metavar="FIRST-LAST", help="the uids jobs run as, one a job"
    )
    runner_cmd.add_argument(
        "--job-groups",
        default="",
        metavar="GROUP,...",
        help="supplementary groups jobs get, by name or id (e.g. dialout,plugdev for serial and USB)",
    )
    runner_cmd.add_argument(
        "--unpack-max-bytes",
        type=int,
        default=4 << 30,
        help="refuse a repository tarball that unpacks to more file bytes than this",
    )
    runner_cmd.add_argument(
        "--unpack-max-files",
        type=int,
        default=200_000,
        help="refuse a repository tarball of more files, folders and links than this",
    )
    runner_cmd.add_argument(
        "--output-max-bytes",
        type=int,
        default=64 << 20,
        help="of a job's output, the most this host keeps and sends (at least the server's "
        "KERRIGAN_OUTPUT_MAX_BYTES)",
    )
    runner_cmd.add_argument(
        "--devices-file",
        metavar="FILE",
        help="YAML: how to find each device on this host (present_if) and its jobs' private env",
    )
    runner_cmd.add_argument(
        "--metrics-host", metavar="HOST", help="where the agent serves /metrics (default: the agent's)"
    )
    runner_cmd.add_argument(
        "--metrics-port",
        metavar="PORT",
        help="the port of the agent's /metrics (0: any free one; default: none)",
    )
    runner_cmd.add_argument("--sysfs-root", default="/sys/devices/system/cpu", help=argparse.SUPPRESS)
    runner_cmd.set_defaults(handler=_runner, runner_command=None)
    runner_sub = runner_cmd.add_subparsers(dest="runner_command", metavar="ACTION")
    topology_cmd = runner_sub.add_parser(
        "topology", help="print the CPU topology the agent reads and where claims would go"
    )
    topology_cmd.add_argument("--sysfs-root", default="/sys/devices/system/cpu", help="sysfs CPU folder")
    topology_cmd.add_argument("--claims", type=_claims, default=[], help="vCPU claims in order, e.g. 2,3,1")
    topology_cmd.add_argument("--json", action="store_true", help="print JSON")
