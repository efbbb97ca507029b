"""``kerrigan reserve`` and ``kerrigan reservations list|show|release|extend``: a board for a person,
against a live lab's API (docs/reservations.md).

``reserve`` asks for a device by labels and tags (or by id) for a duration; with ``--wait`` it waits in the
queue, printing its place and what it waits on, gives up cleanly when the wait runs out, and withdraws the
request on Ctrl-C. ``reserve --job ID`` holds a failed job's board(s) instead (Hold board:
``POST /jobs/{id}/hold``), for ``KERRIGAN_HOLD_S``, waiting for them as a reservation does. Exit status: 0
reserved (or released), 1 the lab refused or no device freed, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import uuid
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from kerrigan.cli.api_client import ApiRefusedError, api_call, api_call_status, api_options
from kerrigan.cli.columns import columns
from kerrigan.cli.usage import UsageError
from kerrigan.core.durations import DurationError, duration_text, parse_duration

T = TypeVar("T")

EXIT_REFUSED: Final = 1
EXIT_INTERRUPTED: Final = 130
POLL_S: Final = 1.0
SETTINGS_WAIT_S: Final = 5.0  # how long a granted reservation waits for its host to report the settings
SETTINGS_POLL_S: Final = 0.2


def _labels(pairs: list[str]) -> dict[str, list[str]]:
    labels: dict[str, list[str]] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise UsageError(f"--labels takes KEY=VALUE, not {pair[:80]!r}")
        labels.setdefault(key, []).append(value)  # a key twice: any of its values
    return labels


def _seconds(text: str, option: str) -> int:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"{option}: {exc}") from None


def _described(body: dict[str, Any]) -> str:
    device = body.get("device") or {}
    labels = ", ".join(f"{k}={v}" for k, v in sorted((device.get("labels") or {}).items()))
    lines = [
        f"reserved {device.get('id')} on runner host {device.get('host')} until {body.get('ends_at')} "
        f"(reservation {body.get('id')})",
        f"  labels: {labels or 'none'}",
    ]
    settings = body.get("settings")
    if isinstance(settings, dict) and settings:
        lines.append(f"  settings on {device.get('host')} (its devices file's, shown to you alone):")
        lines += [f"    {name}={value}" for name, value in sorted(settings.items())]
    elif "settings" in body and settings is None:
        lines.append(
            f"  settings: runner host {device.get('host')} has not reported them yet "
            f"(kerrigan reservations show {body.get('id')})"
        )
    lines.append(f"  release it with: kerrigan reservations release {body.get('id')}")
    return "\n".join(lines)


async def _with_settings(args: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """The granted reservation once its runner host has reported the device's settings for its person,
    or after :data:`SETTINGS_WAIT_S` (a host offline, or one that does not report them)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTINGS_WAIT_S
    while body.get("state") == "active" and body.get("settings", {}) is None and loop.time() < deadline:
        await asyncio.sleep(SETTINGS_POLL_S)
        try:
            body = await api_call(args, "GET", f"/reservations/{body['id']}")
        except (ApiRefusedError, UsageError):  # the board is granted all the same: say so as it stands
            break
    return body


def _progress(body: dict[str, Any]) -> str:
    place = f"position {body['position']}" if body.get("position") else "in the queue"
    return f"waiting for a device, {place}: {body.get('waiting_on') or 'deciding'}"


class WaitInterruptedError(Exception):
    """Ctrl-C while the request waited: it is withdrawn, and the command ends 130."""


class Interrupt:
    """Ctrl-C, caught as an event rather than as a cancellation of whatever was awaited (a cancellation
    that lands inside an HTTP request may be taken for that request's own timeout, and the wait would go
    on). The first Ctrl-C sets it; a second one interrupts as Python does, withdrawing nothing."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.add_signal_handler(signal.SIGINT, self._caught)

    def _caught(self) -> None:
        self.event.set()
        self._loop.remove_signal_handler(signal.SIGINT)  # the next Ctrl-C is Python's KeyboardInterrupt

    def close(self) -> None:
        """Give Ctrl-C back to Python."""
        if not self.event.is_set():
            self._loop.remove_signal_handler(signal.SIGINT)

    async def unless_interrupted(self, work: Awaitable[T]) -> T:
        """``work``'s result, or :class:`WaitInterruptedError` (``work`` cancelled) after a Ctrl-C."""
        if self.event.is_set():
            raise WaitInterruptedError
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise WaitInterruptedError
        return task.result()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or raise :class:`WaitInterruptedError` as soon as Ctrl-C comes."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.event.wait(), seconds)
        if self.event.is_set():
            raise WaitInterruptedError


async def _wait_for_grant(
    args: argparse.Namespace, body: dict[str, Any], interrupt: Interrupt
) -> dict[str, Any]:
    """Poll the reservation until it is no longer waiting, printing each new progress line."""
    said = ""
    while body.get("state") == "waiting":
        line = _progress(body)
        if line != said:
            print(line, file=sys.stderr, flush=True)
            said = line
        await interrupt.sleep(POLL_S)
        body = await interrupt.unless_interrupted(api_call(args, "GET", f"/reservations/{body['id']}"))
    return body


async def _reserve(args: argparse.Namespace) -> int:
    # The request carries an id of the command's own: whatever happens before the lab answers (Ctrl-C, a
    # dropped connection), the command can withdraw exactly what it asked for.
    request: dict[str, Any] = {"id": str(uuid.uuid4()), "duration_s": _seconds(args.duration, "--for")}
    if args.labels:
        request["labels"] = _labels([pair for group in args.labels for pair in group])
    if args.tags:
        request["tags"] = [tag for group in args.tags for tag in group]
    if args.device:
        request["device"] = args.device
    if args.wait:
        request["wait_s"] = _seconds(args.wait, "--wait")
    if args.note:
        request["note"] = args.note
    granted = False
    interrupt = Interrupt()
    try:
        try:
            body = await interrupt.unless_interrupted(api_call(args, "POST", "/reservations", body=request))
        except ApiRefusedError as exc:
            _refused(exc)
            return EXIT_REFUSED
        body = await _wait_for_grant(args, body, interrupt)
        granted = body.get("state") == "active"
        if granted:
            body = await _with_settings(args, body)
    except ApiRefusedError as exc:
        print(f"kerrigan reserve: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED
    except WaitInterruptedError:
        return EXIT_INTERRUPTED  # withdrawn below
    finally:
        if not granted:  # interrupted, cut off, refused or given up: nothing stays queued in its name
            await asyncio.shield(_withdraw(args, request["id"]))
        interrupt.close()
    if args.json:
        print(json.dumps(body, indent=2))
    if granted:
        if not args.json:
            print(_described(body))
        return 0
    waited = duration_text(int(body.get("wait_s") or 0))
    reason = "no device freed within " + waited if body.get("end_reason") == "wait_expired" else "it ended"
    print(f"kerrigan reserve: nothing is reserved: {reason} ({body.get('end_reason')})", file=sys.stderr)
    return EXIT_REFUSED


def _refused(exc: ApiRefusedError) -> None:
    error = exc.body.get("error")
    field = error.get("field") if isinstance(error, dict) else None
    named = f"{field}: " if isinstance(field, str) and field else ""
    print(f"kerrigan reserve: {named}{exc.message} (HTTP {exc.status})", file=sys.stderr)
    resolution = exc.body.get("resolution")
    if isinstance(resolution, dict):
        for row in resolution.get("histogram") or ():
            when = "never" if row.get("permanent") else "not yet"
            print(f"  {row.get('count')}  {row.get('reason')}  [{when}]", file=sys.stderr)


async def _withdraw(args: argparse.Namespace, reservation_id: str) -> None:
    """End the request if the lab holds it and it has not ended; quiet when there is nothing to end."""
    try:
        body = await api_call(args, "GET", f"/reservations/{reservation_id}")
        if body.get("state") == "ended":
            return
        await api_call(args, "DELETE", f"/reservations/{reservation_id}")
    except ApiRefusedError as exc:
        if exc.status != 404:  # 404: the request never reached the lab
            print(f"kerrigan reserve: could not withdraw {reservation_id}: {exc.message}", file=sys.stderr)
    except UsageError as exc:
        print(f"kerrigan reserve: could not withdraw {reservation_id}: {exc}", file=sys.stderr)
    else:
        print(f"kerrigan reserve: withdrawn ({reservation_id})", file=sys.stderr)


async def _hold(args: argparse.Namespace) -> int:
    """``reserve --job ID``: hold the failed job's board(s), each waited for as ``reserve`` waits for one;
    Ctrl-C or a board not freed in time withdraws what this command queued (a hold it found, made before,
    is left as it is)."""
    made, granted, ids = False, False, []
    interrupt = Interrupt()
    try:
        try:
            status, answer = await interrupt.unless_interrupted(
                api_call_status(args, "POST", f"/jobs/{args.job}/hold")
            )
        except ApiRefusedError as exc:
            _refused(exc)
            return EXIT_REFUSED
        made = status == 201
        ids = [str(reservation["id"]) for reservation in answer.get("reservations") or ()]
        reservations = [
            await _wait_for_grant(args, reservation, interrupt)
            for reservation in answer.get("reservations") or ()
        ]
        granted = bool(reservations) and all(body.get("state") == "active" for body in reservations)
        if granted:
            reservations = [await _with_settings(args, body) for body in reservations]
    except ApiRefusedError as exc:
        print(f"kerrigan reserve: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return EXIT_REFUSED
    except WaitInterruptedError:
        return EXIT_INTERRUPTED  # withdrawn below
    finally:
        if made and not granted:  # a gang's boards are held together or not at all
            for reservation_id in ids:
                await asyncio.shield(_withdraw(args, reservation_id))
        interrupt.close()
    if args.json:
        print(json.dumps({"job": answer.get("job"), "reservations": reservations}, indent=2))
    if not granted:
        ended = next((body for body in reservations if body.get("state") != "active"), {})
        waited = duration_text(int(ended.get("wait_s") or 0))
        reason = (
            "no board freed within " + waited if ended.get("end_reason") == "wait_expired" else "it ended"
        )
        print(f"kerrigan reserve: nothing is held: {reason} ({ended.get('end_reason')})", file=sys.stderr)
        return EXIT_REFUSED
    if not args.json:
        print(f"holding the board(s) of failed job {answer.get('job')}" + ("" if made else " (held already)"))
        print("\n".join(_described(body) for body in reservations))
    return 0


def _reserve_command(args: argparse.Namespace) -> int:
    # The first Ctrl-C is caught by :class:`Interrupt` (the request is withdrawn, then 130); a second one,
    # while withdrawing, ends the command at once.
    if args.job is not None:
        given = [
            option
            for option, value in (
                ("--labels", args.labels),
                ("--tags", args.tags),
                ("--device", args.device),
                ("--wait", args.wait),
                ("--note", args.note),
            )
            if value
        ]
        if given:
            raise UsageError(
                f"--job holds the job's own board(s) for KERRIGAN_HOLD_S: not with {', '.join(given)}"
            )
        if not (args.job.isascii() and args.job.isdigit()):
            raise UsageError(f"--job takes a job id (a whole number), not {args.job[:40]!r}")
    try:
        return asyncio.run(_hold(args) if args.job is not None else _reserve(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _call(
    args: argparse.Namespace, method: str, path: str, *rest: Any, **options: Any
) -> dict[str, Any] | None:
    """One call of ``kerrigan reservations``: the answer, or None once the refusal is printed."""
    try:
        return asyncio.run(api_call(args, method, path, *rest, **options))
    except ApiRefusedError as exc:
        print(f"kerrigan reservations: {exc.message} (HTTP {exc.status})", file=sys.stderr)
        return None


def _list(args: argparse.Namespace) -> int:
    query = {"limit": str(args.limit), "ended": "true" if args.ended else "false"}
    if args.login:
        query["login"] = args.login
    if args.cursor:
        query["cursor"] = args.cursor
    body = _call(args, "GET", "/reservations", query)
    if body is None:
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    items = body.get("items") or []
    if not items:
        print("no reservations")
        return 0
    rows = [["ID", "WHO", "STATE", "DEVICE", "HOST", "UNTIL", "NOTE"]]
    for item in items:
        device = item.get("device") or {}
        until = item.get("ends_at") if item.get("state") == "active" else item.get("wait_until")
        rows.append(
            [
                str(item.get("id")),
                str(item.get("login")),
                str(item.get("state")),
                str(device.get("id") or item.get("device_requested") or ""),
                str(device.get("host") or ""),
                str(until or ""),
                str(item.get("note") or ""),
            ]
        )
    print(columns(rows))
    if body.get("next_cursor"):
        print(f"more: add --cursor {body['next_cursor']}", file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    body = _call(args, "GET", f"/reservations/{args.id}")
    if body is None:
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(body, indent=2))
    elif body.get("state") == "active":
        print(_described(body))
    elif body.get("state") == "waiting":
        print(f"reservation {body.get('id')}: {_progress(body)}")
    else:
        print(f"reservation {body.get('id')}: ended ({body.get('end_reason')})")
    return 0


def _release(args: argparse.Namespace) -> int:
    body = _call(args, "DELETE", f"/reservations/{args.id}")
    if body is None:
        return EXIT_REFUSED
    device = (body.get("device") or {}).get("id")
    print(f"released reservation {body.get('id')}" + (f": {device} is free for the queue" if device else ""))
    return 0


def _extend(args: argparse.Namespace) -> int:
    body = {"extend_s": _seconds(args.by, "--by")}
    answer = _call(args, "PATCH", f"/reservations/{args.id}", body=body)
    if answer is None:
        return EXIT_REFUSED
    print(f"reservation {answer.get('id')} now ends at {answer.get('ends_at')}")
    return 0


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan reserve`` and ``kerrigan reservations list|show|release|extend``."""
    reserve = commands.add_parser(
        "reserve",
        help="reserve a board for yourself on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN)",
        description="Reserve a device by labels and tags, or by id, for a while: queued after gate work, "
        "before CI's; or with --job, hold a failed job's board(s). Exit status: 0 reserved, 1 refused or no "
        "device freed in time, 2 usage or connection error, 130 interrupted (the request is withdrawn).",
    )
    reserve.add_argument(
        "--labels", nargs="+", action="append", metavar="KEY=VALUE", help="labels the device must have"
    )
    reserve.add_argument("--tags", nargs="+", action="append", metavar="TAG", help="tags it must have")
    reserve.add_argument("--device", metavar="ID", help="this device (its labels and tags must match too)")
    how = reserve.add_mutually_exclusive_group(required=True)
    how.add_argument("--for", dest="duration", metavar="DURATION", help="2h, 30m, 1h30m")
    how.add_argument(
        "--job",
        metavar="ID",
        help="hold this failed job's board(s) (a gang's: all) for KERRIGAN_HOLD_S, its workspace kept "
        "(Hold board; you must write to its repository)",
    )
    reserve.add_argument("--wait", metavar="DURATION", help="wait this long for one to free (default: not)")
    reserve.add_argument("--note", metavar="TEXT", help="why, shown wherever the device is (200 characters)")
    reserve.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(reserve)
    reserve.set_defaults(handler=_reserve_command)
    reservations = commands.add_parser(
        "reservations",
        help="list and release reservations on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN)",
        description="Exit status: 0 done, 1 the API refused (the reason is printed), 2 usage or connection.",
    )
    sub = reservations.add_subparsers(dest="reservations_command", required=True, metavar="ACTION")
    list_cmd = sub.add_parser("list", help="waiting and active reservations, newest first")
    list_cmd.add_argument("--login", help="only this person's")
    list_cmd.add_argument("--ended", action="store_true", help="ended ones too")
    list_cmd.add_argument("--limit", type=int, default=50, metavar="N", help="at most N (1-500)")
    list_cmd.add_argument("--cursor", help="the next page (printed after a full page)")
    list_cmd.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(list_cmd)
    list_cmd.set_defaults(handler=_list)
    show = sub.add_parser("show", help="one reservation: its device, host, labels and (yours) settings")
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(show)
    show.set_defaults(handler=_show)
    release = sub.add_parser("release", help="end a reservation (or withdraw it while it waits)")
    release.add_argument("id", metavar="ID")
    api_options(release)
    release.set_defaults(handler=_release)
    extend = sub.add_parser("extend", help="give an active reservation more time, while nobody waits for it")
    extend.add_argument("id", metavar="ID")
    extend.add_argument("--by", required=True, metavar="DURATION", help="30m, 1h")
    api_options(extend)
    extend.set_defaults(handler=_extend)
