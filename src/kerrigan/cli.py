"""The ``kerrigan`` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerrigan import __version__
from kerrigan.config import ConfigError, Settings
from kerrigan.core.explain import EXIT_INVALID, explain, explanation_json, invalid_input, render_text
from kerrigan.core.inventory import Inventory, RepositoryGlobError, validate_repository
from kerrigan.core.inventory_file import inventory_document, parse_inventory
from kerrigan.core.manifest import parse_manifest

if TYPE_CHECKING:
    from kerrigan.store.database import Database

# The server, the store and their libraries are imported by the commands that use them, so that
# `kerrigan explain` starts in a fraction of the time.


class UsageError(Exception):
    """A mistake in how the command was called; printed as one line, exit status 2."""


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path}: is a directory, not a file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror}") from None


def _explain(args: argparse.Namespace) -> int:
    repository: str | None = args.repository
    if repository is not None:
        try:
            validate_repository(repository)
        except RepositoryGlobError as exc:
            raise UsageError(f"--repository: {exc}") from None
    manifest = parse_manifest(_read(args.manifest, "manifest"), args.manifest)
    if args.inventory is None:  # the lab as the server sees it now: health, maintenance, pauses, presence
        explanation = explain(manifest, _stored_inventory(), repository=repository)
    else:
        inventory_result = parse_inventory(_read(args.inventory, "inventory"), args.inventory)
        if inventory_result.inventory is None:
            explanation = invalid_input(manifest, inventory_result.errors)
        else:
            explanation = explain(manifest, inventory_result.inventory, repository=repository)
    if args.format == "json":
        json.dump(explanation_json(explanation), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(explanation))
    return explanation.exit_code


def _stored_inventory() -> Inventory:
    """The inventory in the lab's database (``KERRIGAN_DATABASE_URL``), with its live state."""
    from kerrigan.store.inventory import load_inventory

    found: list[Inventory] = []

    async def work(database: Database) -> int:
        async with database.sessions() as session:
            found.append(await load_inventory(session))
        return 0

    asyncio.run(_with_database(_settings(), work))
    return found[0]


def _settings() -> Settings:
    try:
        return Settings.from_env(os.environ)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


async def _with_database(settings: Settings, work: Callable[[Database], Awaitable[int]]) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from kerrigan.store.database import Database, SchemaBehindError, check_schema

    database = Database.connect(settings.database_url)
    try:
        await check_schema(database.engine)
        return await work(database)
    except SchemaBehindError as exc:
        raise UsageError(str(exc)) from None
    except (OSError, SQLAlchemyError) as exc:
        raise UsageError(f"cannot use the database: {_first_line(exc)}") from None
    finally:
        await database.close()


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _require_current_schema(settings: Settings) -> None:
    """Stop with one line (what to run) unless the database is reachable and at the code's revision."""

    async def nothing(database: Database) -> int:
        return 0

    asyncio.run(_with_database(settings, nothing))


def _db_upgrade(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from kerrigan.store.database import Database, current_revision, upgrade

    settings = _settings()

    async def run() -> str | None:
        database = Database.connect(settings.database_url)
        try:
            await upgrade(database.engine)
            return await current_revision(database.engine)
        except (OSError, SQLAlchemyError) as exc:
            raise UsageError(f"cannot upgrade the database: {_first_line(exc)}") from None
        finally:
            await database.close()

    print(f"database at revision {asyncio.run(run())}")
    return 0


def _tokens_create(args: argparse.Namespace) -> int:
    from kerrigan.store.tokens import create_token

    login = args.login
    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})", login):
        raise UsageError(f"--login {login!r} is not a GitHub login")

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            token = await create_token(session, login, database.clock())
        print(token)
        return 0

    return asyncio.run(_with_database(_settings(), work))


def _runners_create(args: argparse.Namespace) -> int:
    from kerrigan.store.runners import create_runner_token

    host = args.host
    if not re.fullmatch(r"[a-z0-9._-]{1,63}", host):
        raise UsageError(
            f"{host!r} is not a runner host id: 1-63 of lowercase letters, digits, '.', '_', '-'"
        )

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            token = await create_runner_token(session, host, database.clock())
        print(token)
        return 0

    return asyncio.run(_with_database(_settings(), work))


EXIT_CONFLICT = 1  # an import refused: the file and the database changed the same fields differently


def _import_actor(name: str | None) -> str:
    """Who the audit log names for an import: ``--actor``, else the user running the command."""
    if name is None:
        import getpass

        try:
            name = getpass.getuser()
        except (OSError, KeyError):
            raise UsageError("cannot tell who is importing: pass --actor NAME") from None
    name = name.strip()
    if not 1 <= len(name) <= 100:
        raise UsageError("--actor: the name must be 1-100 characters")
    return name


def _inventory_import(args: argparse.Namespace) -> int:
    from kerrigan.core.inventory_file import DocumentError
    from kerrigan.core.inventory_merge import merge_inventory
    from kerrigan.store.audit import Change
    from kerrigan.store.inventory import ConflictError, NotFoundError, StaleError, apply_diff, load_inventory
    from kerrigan.store.inventory_imports import last_import, record_import

    result = parse_inventory(_read(args.file, "inventory"), args.file)
    if result.inventory is None:
        for problem in result.errors:
            print(f"error: {problem}", file=sys.stderr)
        print(f"{len(result.errors)} error(s); nothing was changed", file=sys.stderr)
        return EXIT_INVALID
    desired = result.inventory
    actor = _import_actor(args.actor)

    async def work(database: Database) -> int:
        async with database.sessions() as session, session.begin():
            try:
                base = await last_import(session)
            except DocumentError as exc:
                raise UsageError(f"the stored last import cannot be read: {exc}") from None
            current = await load_inventory(session)
            plan = merge_inventory(
                base.inventory if base else None, desired, current, prune=args.prune, force=args.force
            )
            for field_change in plan.diff.changes:
                print(field_change)
            for conflict in plan.conflicts:
                print(conflict)
            counts = ", ".join(f"{count} {name}" for name, count in plan.diff.counts().items())
            if plan.conflicts and not args.force:
                await session.rollback()
                since = (
                    f"since the last import ({base.imported_at:%Y-%m-%d %H:%M} UTC by {base.actor})"
                    if base
                    else "(there is no earlier import to merge against: every field where they differ "
                    "counts, see `kerrigan inventory export`)"
                )
                print(
                    ("dry run: " if args.dry_run else "")
                    + f"{len(plan.conflicts)} conflict(s): the file and the database changed these "
                    f"differently {since}; nothing was changed. Make the file agree, or pass --force to "
                    "apply the file's values",
                    file=sys.stderr,
                )
                return EXIT_CONFLICT
            forced = f"; {len(plan.conflicts)} conflict(s) resolved the file's way (--force)"
            forced = forced if plan.conflicts else ""
            if args.dry_run:
                await session.rollback()
                would = f"would apply {counts}" if plan.diff else "no changes to apply"
                print(f"dry run: {would}{forced}; nothing was changed")
                return 0
            change = Change(actor, database.clock())
            try:
                await apply_diff(session, plan.merged, plan.diff, change)
            except (ConflictError, NotFoundError, StaleError) as exc:
                raise UsageError(f"cannot apply the file: {exc}; nothing was changed") from None
            await record_import(session, plan.next_base, change)
        if not plan.diff:
            print("no changes: the database already has every change the file makes")
        else:
            print(f"applied: {counts}{forced}")
        return 0

    return asyncio.run(_with_database(_settings(), work))


def _inventory_export(args: argparse.Namespace) -> int:
    import yaml

    from kerrigan.store.inventory import load_inventory

    async def work(database: Database) -> int:
        async with database.sessions() as session:
            document = inventory_document(await load_inventory(session))
        if args.format == "json":
            json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
        else:
            yaml.safe_dump(document, sys.stdout, sort_keys=False, allow_unicode=True, width=110)
        return 0

    return asyncio.run(_with_database(_settings(), work))


def _serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from kerrigan.app import create_app, tune_collector

    settings = _settings()

    _require_current_schema(settings)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workers = settings.workers
    if workers is None:  # SQLite takes one writer at a time: across processes they would wait on each other
        workers = 0 if settings.database_url.startswith("sqlite") else 1
    app = create_app(settings, worker_processes=workers)
    app.on_startup.append(tune_collector)  # after the application's own start-up
    web.run_app(app, host=settings.host, port=settings.port, print=None)
    return 0


def _worker(args: argparse.Namespace) -> int:
    from kerrigan.app import run_worker

    settings = _settings()
    if not (settings.github_app_id and settings.github_private_key):
        raise UsageError("KERRIGAN_GITHUB_APP_ID and KERRIGAN_GITHUB_PRIVATE_KEY(_PATH) are needed")

    _require_current_schema(settings)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loop = asyncio.new_event_loop()
    task = loop.create_task(run_worker(settings))
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        loop.run_until_complete(task)
    loop.close()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from kerrigan.demo import run_demo

    try:
        return asyncio.run(run_demo(keep_running=args.keep_running))
    except KeyboardInterrupt:
        return 0


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


def _runner(args: argparse.Namespace) -> int:
    if args.runner_command == "topology":
        return _runner_topology(args)
    import aiohttp

    from kerrigan.core.disk import DiskPolicy
    from kerrigan.core.host_capacity import HostLimits
    from kerrigan.core.unpacking import UnpackLimits
    from kerrigan.runner.agent import Agent, AgentSettings, not_dumpable
    from kerrigan.runner.devices_file import load_devices_file
    from kerrigan.runner.isolation.probe import IsolationUnavailableError
    from kerrigan.runner.isolation.users import UserRange
    from kerrigan.runner.server import ServerRefused, ServerUnavailable
    from kerrigan.runner.topology import TopologyError

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
    try:
        settings = AgentSettings(
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
            github_retry_s=args.github_retry_s,
            # A DevicesFileError is a ValueError: one line naming the file, its line and field.
            devices_file=load_devices_file(Path(args.devices_file)) if args.devices_file else None,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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
            except ServerRefused as exc:
                raise UsageError(f"the server refused the runner: {exc}") from None
            except ServerUnavailable as exc:
                raise UsageError(f"the server cannot be reached: {exc}") from None
            except asyncio.CancelledError:
                log_stop = logging.getLogger("kerrigan.runner")
                log_stop.info("stopped")
        return 0

    return asyncio.run(work())


def _add_runner_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        "--free-space-floor-bytes", type=int, default=128 << 30, help="refuse jobs below this (0: off)"
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
        "--devices-file",
        metavar="FILE",
        help="YAML: how to find each device on this host (present_if) and its jobs' private env",
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


# -- kerrigan sessions: history and cancel, against a live lab's API -----------------------------------------

SESSION_LIST_FILTERS = {
    "repository": "owner/name",
    "branch": "the pushed branch",
    "workflow": "the manifest's name",
    "state": "queued, in_progress or completed",
    "conclusion": "success, failure, cancelled or timed_out",
    "device": "a device one of its jobs ran on",
    "since": "created at or after, ISO 8601 with a zone: 2026-12-01T09:00:00Z",
}
EXIT_REFUSED = 1


class ApiRefusedError(Exception):
    """The API answered with an error: its status, code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _api_target(args: argparse.Namespace) -> tuple[str, str | None]:
    url = args.url or os.environ.get("KERRIGAN_URL", "")
    if not url:
        raise UsageError("say where the lab is: --url or KERRIGAN_URL (like https://kerrigan.example.com)")
    if not re.match(r"https?://[^/\s]+", url):
        raise UsageError(f"--url must be an http:// or https:// address, not {url[:80]!r}")
    return url.rstrip("/"), args.token or os.environ.get("KERRIGAN_TOKEN") or None


async def _api_call(
    args: argparse.Namespace, method: str, path: str, query: dict[str, str] | None = None
) -> dict[str, Any]:
    """One request to ``/api/v1``; the JSON body. An API error is :class:`ApiRefusedError`; a lab that
    cannot be reached is a :class:`UsageError` of one line."""
    import aiohttp

    url, token = _api_target(args)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http,
            http.request(method, f"{url}/api/v1{path}", params=query, headers=headers) as response,
        ):
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
            if response.status >= 400:
                error = body.get("error") if isinstance(body, dict) else None
                if not isinstance(error, dict):
                    error = {"code": "error", "message": f"{url} answered HTTP {response.status}"}
                raise ApiRefusedError(response.status, str(error.get("code")), str(error.get("message")))
            if not isinstance(body, dict):
                raise UsageError(f"{url} did not answer as Kerrigan's API does (no JSON object at {path})")
            return body
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise UsageError(f"cannot reach {url}: {_first_line(exc) or type(exc).__name__}") from None


def _refused(exc: ApiRefusedError) -> int:
    print(f"kerrigan sessions: {exc.message} (HTTP {exc.status})", file=sys.stderr)
    return EXIT_REFUSED


def _outcome(session: dict[str, object]) -> str:
    conclusion = session.get("conclusion")
    return f"{session.get('state')} ({conclusion})" if conclusion else str(session.get("state"))


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _sessions_list(args: argparse.Namespace) -> int:
    query = {
        name: str(getattr(args, name)) for name in SESSION_LIST_FILTERS if getattr(args, name) is not None
    }
    query["limit"] = str(args.limit)
    if args.cursor:
        query["cursor"] = args.cursor
    try:
        body = asyncio.run(_api_call(args, "GET", "/sessions", query))
    except ApiRefusedError as exc:
        return _refused(exc)
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    items: list[dict[str, object]] = body["items"]
    if not items:
        print("no sessions match")
        return 0
    rows = [["ID", "CREATED", "REPOSITORY", "BRANCH", "WORKFLOW", "COMMIT", "STATE", "DEVICES"]]
    for item in items:
        devices = item.get("devices") or []
        assert isinstance(devices, list)
        rows.append(
            [
                str(item["id"]),
                str(item["created_at"]),
                str(item["repository"]),
                str(item.get("branch") or ""),
                str(item["workflow"]),
                str(item["commit"])[:7],
                _outcome(item),
                ",".join(map(str, devices)),
            ]
        )
    print(_table(rows))
    if body.get("next_cursor"):
        print(f"more: add --cursor {body['next_cursor']}", file=sys.stderr)
    return 0


def _sessions_show(args: argparse.Namespace) -> int:
    try:
        body = asyncio.run(_api_call(args, "GET", f"/sessions/{args.id}"))
    except ApiRefusedError as exc:
        return _refused(exc)
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    for label, key in (
        ("session", "id"),
        ("repository", "repository"),
        ("branch", "branch"),
        ("workflow", "workflow"),
        ("commit", "commit"),
        ("created", "created_at"),
        ("finished", "finished_at"),
    ):
        print(f"{label + ':':12} {body.get(key) or ''}".rstrip())
    print(f"{'state:':12} {_outcome(body)}")
    if body.get("cancelled_by") or body.get("cancel_reason"):
        print(
            f"{'cancelled:':12} {body.get('cancelled_by') or 'kerrigan'}: {body.get('cancel_reason') or ''}"
        )
    jobs: list[dict[str, object]] = body.get("jobs") or []
    if jobs:
        rows = [
            ["JOB", "TASK", "ATTEMPT", "STATE", "FAILURE", "DEVICE", "HOST", "EXIT", "STARTED", "FINISHED"]
        ]
        for job in jobs:
            rows.append(
                [
                    str(job["id"]),
                    str(job["task"]),
                    str(job["attempt"]) + (f" (retry of {job['retry_of']})" if job.get("retry_of") else ""),
                    str(job["state"]),
                    str(job.get("failure_class") or ""),
                    str(job.get("device") or ""),
                    str(job.get("host") or ""),
                    "" if job.get("exit_status") is None else str(job["exit_status"]),
                    str(job.get("started_at") or ""),
                    str(job.get("finished_at") or ""),
                ]
            )
        print()
        print(_table(rows))
    return 0


def _sessions_cancel(args: argparse.Namespace) -> int:
    async def cancel() -> tuple[int, dict[str, Any]]:
        try:
            return 0, await _api_call(args, "POST", f"/sessions/{args.id}/cancel")
        except ApiRefusedError as exc:
            if exc.status != 409:
                raise
            print(f"kerrigan sessions: {exc.message}", file=sys.stderr)
            return EXIT_REFUSED, await _api_call(args, "GET", f"/sessions/{args.id}")

    try:
        status, body = asyncio.run(cancel())
    except ApiRefusedError as exc:
        return _refused(exc)
    if status:
        print(f"session {body.get('id')} has ended: {_outcome(body)}")
        return status
    state = _outcome(body)
    print(f"session {body.get('session')}: {state}" + ("" if body.get("changed", True) else " (unchanged)"))
    return 0


def _add_sessions_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan sessions list|show|cancel``, a client of a live lab's API."""
    sessions_cmd = commands.add_parser(
        "sessions",
        help="find, show and cancel sessions on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN)",
        description="A client of the lab's REST API. Exit status: 0 done, 1 the API refused (the reason is "
        "printed; cancelling an ended session), 2 a usage or connection error.",
    )
    sessions_sub = sessions_cmd.add_subparsers(dest="sessions_command", required=True, metavar="ACTION")

    def target(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--url", help="the lab's address (default: KERRIGAN_URL)")
        parser.add_argument(
            "--token",
            help="an API token (default: KERRIGAN_TOKEN, which other users of the host cannot read in the "
            "process list as they can an option)",
        )

    list_cmd = sessions_sub.add_parser("list", help="sessions, newest first")
    for name, meaning in SESSION_LIST_FILTERS.items():
        list_cmd.add_argument(f"--{name}", metavar=name.upper(), help=meaning)
    list_cmd.add_argument("--limit", type=int, default=50, metavar="N", help="at most N sessions (1-500)")
    list_cmd.add_argument("--cursor", help="the next page, as a previous list printed it")
    list_cmd.add_argument("--json", action="store_true", help="print the API's answer")
    target(list_cmd)
    list_cmd.set_defaults(handler=_sessions_list)
    show_cmd = sessions_sub.add_parser("show", help="one session with its jobs and attempts")
    show_cmd.add_argument("id", metavar="ID")
    show_cmd.add_argument("--json", action="store_true", help="print the API's answer")
    target(show_cmd)
    show_cmd.set_defaults(handler=_sessions_show)
    cancel_cmd = sessions_sub.add_parser(
        "cancel", help="cancel a session: its jobs stop, its check run says who"
    )
    cancel_cmd.add_argument("id", metavar="ID")
    target(cancel_cmd)
    cancel_cmd.set_defaults(handler=_sessions_cancel)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="kerrigan", description="Hardware-in-the-loop test sessions on a lab of devkits."
    )
    parser.add_argument("--version", action="version", version=f"kerrigan {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    explain_cmd = commands.add_parser(
        "explain",
        help="resolve a workflow manifest against an inventory file (or the lab's database) and say why",
        description="Resolve every task of MANIFEST against INVENTORY (without it: the lab's database, "
        "KERRIGAN_DATABASE_URL, with each device's health, maintenance, host pause and presence as the "
        "server sees them now) and explain each decision. "
        "Exit status: 0 every task has an eligible device, 1 some task has none, 2 invalid input.",
    )
    explain_cmd.add_argument(
        "--inventory", metavar="INVENTORY", help="inventory file (YAML); without it, the lab's database"
    )
    explain_cmd.add_argument("manifest", metavar="MANIFEST", help="workflow manifest (YAML)")
    explain_cmd.add_argument("--format", choices=("text", "json"), default="text")
    explain_cmd.add_argument(
        "--repository",
        metavar="OWNER/NAME",
        help="explain for a session of this repository: pools whose repositories list does not admit it "
        "are rejected (without it, no pool's list is applied)",
    )
    explain_cmd.set_defaults(handler=_explain)

    demo_cmd = commands.add_parser(
        "demo", help="push to a GitHub stand-in and show the check runs Kerrigan posts (nothing to set up)"
    )
    demo_cmd.add_argument("--keep-running", action="store_true", help="keep the server up afterwards")
    demo_cmd.set_defaults(handler=_demo)

    serve_cmd = commands.add_parser("serve", help="run the server (KERRIGAN_HOST, KERRIGAN_PORT)")
    serve_cmd.set_defaults(handler=_serve)

    worker_cmd = commands.add_parser(
        "worker", help="process stored webhook deliveries (kerrigan serve starts KERRIGAN_WORKERS of these)"
    )
    worker_cmd.set_defaults(handler=_worker)

    db_cmd = commands.add_parser("db", help="the database schema").add_subparsers(
        dest="db_command", required=True, metavar="ACTION"
    )
    db_cmd.add_parser("upgrade", help="apply migrations (KERRIGAN_DATABASE_URL)").set_defaults(
        handler=_db_upgrade
    )

    tokens_cmd = commands.add_parser("tokens", help="API tokens").add_subparsers(
        dest="tokens_command", required=True, metavar="ACTION"
    )
    create_cmd = tokens_cmd.add_parser("create", help="print a new API token for a GitHub login")
    create_cmd.add_argument("--login", required=True, help="the GitHub login the token acts as")
    create_cmd.set_defaults(handler=_tokens_create)

    runners_cmd = commands.add_parser("runners", help="runner hosts").add_subparsers(
        dest="runners_command", required=True, metavar="ACTION"
    )
    runner_create = runners_cmd.add_parser(
        "create", help="print a new token for a runner host (the host's previous token stops working)"
    )
    runner_create.add_argument("host", metavar="HOST", help="the runner host's id, as the inventory names it")
    runner_create.set_defaults(handler=_runners_create)

    _add_runner_parser(commands)
    _add_sessions_parser(commands)

    inventory_cmd = commands.add_parser("inventory", help="inventory as code").add_subparsers(
        dest="inventory_command", required=True, metavar="ACTION"
    )
    import_cmd = inventory_cmd.add_parser(
        "import",
        help="merge an inventory file into the database: what the file changed since the last import",
        description="Apply what FILE changed since the last import; fields changed in the database since "
        "keep their value, and a field both changed differently is a conflict, which refuses the import "
        "unless --force. Exit status: 0 applied (or a clean dry run), 1 conflicts, 2 invalid input.",
    )
    import_cmd.add_argument("file", metavar="FILE")
    import_cmd.add_argument(
        "--dry-run", action="store_true", help="print the changes and the conflicts, change nothing"
    )
    import_cmd.add_argument(
        "--prune", action="store_true", help="also remove what the file dropped since the last import"
    )
    import_cmd.add_argument(
        "--force", action="store_true", help="apply the file's value where the database changed it too"
    )
    import_cmd.add_argument(
        "--actor", metavar="NAME", help="who the audit log names (default: the user running the command)"
    )
    import_cmd.set_defaults(handler=_inventory_import)
    export_cmd = inventory_cmd.add_parser("export", help="write the inventory in the file format")
    export_cmd.add_argument("--format", choices=("yaml", "json"), default="yaml")
    export_cmd.set_defaults(handler=_inventory_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
    except UsageError as exc:
        print(f"kerrigan {args.command}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_INVALID
    return status


def run() -> None:
    """Console-script entry point."""
    raise SystemExit(main())


if __name__ == "__main__":
    run()
