"""``kerrigan sessions list|show|cancel``: history and cancel, against a live lab's API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from kerrigan.cli.api_client import ApiRefusedError, api_call, api_options
from kerrigan.cli.columns import columns

SESSION_LIST_FILTERS = {
    "repository": "owner/name",
    "branch": "the pushed branch",
    "workflow": "the manifest's name",
    "state": "queued, in_progress or completed",
    "conclusion": "success, failure, cancelled, timed_out, action_required or neutral",
    "device": "a device one of its jobs ran on",
    "since": "created at or after, ISO 8601 with a zone: 2026-12-01T09:00:00Z",
}
EXIT_REFUSED = 1


def _refused(exc: ApiRefusedError) -> int:
    print(f"kerrigan sessions: {exc.message} (HTTP {exc.status})", file=sys.stderr)
    return EXIT_REFUSED


def _outcome(session: dict[str, object]) -> str:
    conclusion = session.get("conclusion")
    return f"{session.get('state')} ({conclusion})" if conclusion else str(session.get("state"))


def _sessions_list(args: argparse.Namespace) -> int:
    query = {
        name: str(getattr(args, name)) for name in SESSION_LIST_FILTERS if getattr(args, name) is not None
    }
    query["limit"] = str(args.limit)
    if args.cursor:
        query["cursor"] = args.cursor
    try:
        body = asyncio.run(api_call(args, "GET", "/sessions", query))
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
    print(columns(rows))
    if body.get("next_cursor"):
        print(f"more: add --cursor {body['next_cursor']}", file=sys.stderr)
    return 0


def _sessions_show(args: argparse.Namespace) -> int:
    try:
        body = asyncio.run(api_call(args, "GET", f"/sessions/{args.id}"))
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
                    "no board" if job.get("boardless") else str(job.get("device") or ""),
                    str(job.get("host") or ""),
                    "" if job.get("exit_status") is None else str(job["exit_status"]),
                    str(job.get("started_at") or ""),
                    str(job.get("finished_at") or ""),
                ]
            )
        print()
        print(columns(rows))
    return 0


def _sessions_cancel(args: argparse.Namespace) -> int:
    async def cancel() -> tuple[int, dict[str, Any]]:
        try:
            return 0, await api_call(args, "POST", f"/sessions/{args.id}/cancel")
        except ApiRefusedError as exc:
            if exc.status != 409:
                raise
            print(f"kerrigan sessions: {exc.message}", file=sys.stderr)
            return EXIT_REFUSED, await api_call(args, "GET", f"/sessions/{args.id}")

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


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kerrigan sessions list|show|cancel``, a client of a live lab's API."""
    sessions_cmd = commands.add_parser(
        "sessions",
        help="find, show and cancel sessions on a running lab (KERRIGAN_URL, KERRIGAN_TOKEN)",
        description="A client of the lab's REST API. Exit status: 0 done, 1 the API refused (the reason is "
        "printed; cancelling an ended session), 2 a usage or connection error.",
    )
    sessions_sub = sessions_cmd.add_subparsers(dest="sessions_command", required=True, metavar="ACTION")

    list_cmd = sessions_sub.add_parser("list", help="sessions, newest first")
    for name, meaning in SESSION_LIST_FILTERS.items():
        list_cmd.add_argument(f"--{name}", metavar=name.upper(), help=meaning)
    list_cmd.add_argument("--limit", type=int, default=50, metavar="N", help="at most N sessions (1-500)")
    list_cmd.add_argument("--cursor", help="the next page, as a previous list printed it")
    list_cmd.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(list_cmd)
    list_cmd.set_defaults(handler=_sessions_list)
    show_cmd = sessions_sub.add_parser("show", help="one session with its jobs and attempts")
    show_cmd.add_argument("id", metavar="ID")
    show_cmd.add_argument("--json", action="store_true", help="print the API's answer")
    api_options(show_cmd)
    show_cmd.set_defaults(handler=_sessions_show)
    cancel_cmd = sessions_sub.add_parser(
        "cancel", help="cancel a session: its jobs stop, its check run says who"
    )
    cancel_cmd.add_argument("id", metavar="ID")
    api_options(cancel_cmd)
    cancel_cmd.set_defaults(handler=_sessions_cancel)
