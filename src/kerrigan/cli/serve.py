"""``kerrigan serve``, ``kerrigan worker`` and ``kerrigan demo``: the processes that run a lab."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from typing import TYPE_CHECKING, Any

from kerrigan.cli.database import require_current_schema
from kerrigan.cli.logs import configure_logging
from kerrigan.cli.settings import load_settings
from kerrigan.cli.usage import UsageError, first_line, port_number

if TYPE_CHECKING:
    from kerrigan.config import Settings

log = logging.getLogger(__name__)
_HIDDEN = "***"


def _shown_database(url: str) -> str:
    """The database URL with its password, and any query value that may be one, as ``***``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return "(a database URL SQLAlchemy cannot read)"
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    query = [
        (key, _HIDDEN if any(word in key.lower() for word in ("pass", "secret", "token", "key")) else value)
        for key, values in parsed.query.items()
        for value in ((values,) if isinstance(values, str) else values)  # ?options=a&options=b: a tuple
    ]
    if not query:
        return shown
    return shown + "?" + "&".join(f"{key}={value}" for key, value in query)


def serving_line(settings: Settings, workers: int) -> str:
    """What ``kerrigan serve`` says once it listens: where, on which database (never its password), and
    which processes handle deliveries."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    if not settings.process_deliveries:
        handled = "no worker process: KERRIGAN_WORKERS=none leaves deliveries to workers run apart"
    elif workers == 0:
        handled = "no worker process: this one handles deliveries"
    else:
        handled = f"{workers} worker process{'es' if workers != 1 else ''}"
    return (
        f"kerrigan serve: listening on http://{host}:{settings.port}; "
        f"database {_shown_database(settings.database_url)}; {handled}"
    )


def _serve(args: argparse.Namespace) -> int:
    from aiohttp import web

    from kerrigan.app import create_app, tune_collector
    from kerrigan.logs import AccessLogger

    flags: dict[str, str] = {}
    if args.host is not None:
        flags["KERRIGAN_HOST"] = args.host
    if args.port is not None:
        flags["KERRIGAN_PORT"] = str(port_number(args.port, "--port"))
    settings = load_settings(flags)
    # The worker processes the server starts read their settings from this process's environment: with
    # the flags in it they agree with the server (on the default KERRIGAN_PUBLIC_URL, for one).
    os.environ.update(flags)

    require_current_schema(settings)
    configure_logging(settings)
    workers = settings.workers
    if workers is None:  # SQLite takes one writer at a time: across processes they would wait on each other
        workers = 0 if settings.database_url.startswith("sqlite") else 1
    app = create_app(settings, worker_processes=workers)
    app.on_startup.append(tune_collector)  # after the application's own start-up
    try:
        web.run_app(
            app,
            host=settings.host,
            port=settings.port,
            # aiohttp calls this once the socket listens: the line is true when it is written.
            print=lambda _: log.info("%s", serving_line(settings, workers)),
            access_log_class=AccessLogger,
        )
    except OSError as exc:  # the port is taken, or the address is not this host's
        raise UsageError(f"cannot listen on {settings.host}:{settings.port}: {first_line(exc)}") from None
    return 0


def _worker(args: argparse.Namespace) -> int:
    from kerrigan.app import MetricsPortError, run_worker

    settings = load_settings()
    if not (settings.github_app_id and settings.github_private_key):
        raise UsageError("KERRIGAN_GITHUB_APP_ID and KERRIGAN_GITHUB_PRIVATE_KEY(_PATH) are needed")
    # Passed only when given, so that a run_worker without these parameters keeps working.
    metrics: dict[str, Any] = {}
    if args.metrics_host is not None:
        metrics["metrics_host"] = args.metrics_host
    if args.metrics_port is not None:
        metrics["metrics_port"] = port_number(args.metrics_port, "--metrics-port", least=0)

    require_current_schema(settings)
    configure_logging(settings)
    loop = asyncio.new_event_loop()
    task = loop.create_task(run_worker(settings, **metrics))
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, task.cancel)
    try:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
    except MetricsPortError as exc:
        raise UsageError(str(exc)) from None
    finally:
        loop.close()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from kerrigan.demo import run_demo

    try:
        return asyncio.run(run_demo(keep_running=args.keep_running))
    except KeyboardInterrupt:
        return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``demo``, ``serve`` and ``worker``."""
    demo_cmd = commands.add_parser(
        "demo", help="push to a GitHub stand-in and show the check runs Kerrigan posts (nothing to set up)"
    )
    demo_cmd.add_argument("--keep-running", action="store_true", help="keep the server up afterwards")
    demo_cmd.set_defaults(handler=_demo)

    serve_cmd = commands.add_parser(
        "serve",
        help="run the server (KERRIGAN_HOST, KERRIGAN_PORT)",
        description="Run the server. Settings come from the environment and, under it, from kerrigan.env "
        "in the working directory when there is one; --host and --port win over both.",
    )
    serve_cmd.add_argument("--host", metavar="HOST", help="the address to listen on (default: KERRIGAN_HOST)")
    serve_cmd.add_argument("--port", metavar="PORT", help="the port to listen on (default: KERRIGAN_PORT)")
    serve_cmd.set_defaults(handler=_serve)

    worker_cmd = commands.add_parser(
        "worker", help="process stored webhook deliveries (kerrigan serve starts KERRIGAN_WORKERS of these)"
    )
    worker_cmd.add_argument("--metrics-host", metavar="HOST", help="where the worker serves /metrics")
    worker_cmd.add_argument(
        "--metrics-port", metavar="PORT", help="the port of the worker's /metrics (0: any free one)"
    )
    worker_cmd.set_defaults(handler=_worker)
