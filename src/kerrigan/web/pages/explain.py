"""``/explain``: paste a manifest, pick a repository, see how it resolves against the live inventory.

The answer comes from the engine ``kerrigan explain`` and ``POST /api/v1/explain`` use (``core.explain``
on the stored inventory, with the approved keys' descriptions), through the same JSON document, and is
rendered with the session page's task partial. The repository names the manifest's home: the page links
the newest session of the same workflow there, to compare with what happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from kerrigan.core.explain import EXIT_INVALID, EXIT_OK, Explanation, explain, explanation_json
from kerrigan.core.inventory import Inventory
from kerrigan.core.manifest import ManifestResult, parse_manifest
from kerrigan.core.resolution import ProblemRecord, Resolution
from kerrigan.core.roles import Principal
from kerrigan.store.inventory import load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.session_pages import DeviceFacts, known_repositories, latest_session
from kerrigan.web.api.explain import DEFAULT_PATH
from kerrigan.web.bodies import MAX_BODY
from kerrigan.web.pages.rendering import render
from kerrigan.web.pages.sessions.resolution_views import TaskView, bounded, named_devices, task_view
from kerrigan.web.reading import read_access
from kerrigan.web.signin import check_csrf, page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

MAX_PATH: Final = 500
MAX_QUERY: Final = 200


@dataclass(frozen=True, slots=True)
class SourceLine:
    """A line of the pasted manifest, with what the answer says about it."""

    number: int
    text: str
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # warnings and did-you-mean hints


def source_lines(
    text: str, errors: Sequence[ProblemRecord], warnings: Sequence[ProblemRecord], tasks: Sequence[TaskView]
) -> list[SourceLine]:
    """The manifest's lines, each with the errors, warnings and hints placed on it."""
    placed_errors: dict[int, list[str]] = {}
    placed_notes: dict[int, list[str]] = {}
    for problem in errors:
        if problem.line is not None:
            placed_errors.setdefault(problem.line, []).append(_where(problem.field, problem.message))
    for problem in warnings:
        if problem.line is not None:
            placed_notes.setdefault(problem.line, []).append(_where(problem.field, problem.message))
    for task in tasks:
        for hint in task.hints:
            if hint.line is not None:
                placed_notes.setdefault(hint.line, []).append(_where(hint.field, hint.message))
    return [
        SourceLine(
            number,
            line,
            tuple(placed_errors.get(number, ())),
            tuple(dict.fromkeys(placed_notes.get(number, ()))),  # two tasks give the same hint once
        )
        for number, line in enumerate(text.splitlines() or [""], start=1)
    ]


def _where(field: str, message: str) -> str:
    return f"{field}: {message}" if field else message


def inventory_facts(inventory: Inventory, device_ids: set[str]) -> dict[str, DeviceFacts]:
    """The facts the task partial shows of the named devices, from the snapshot resolved against."""
    devices = inventory.devices_by_id
    return {
        device_id: DeviceFacts(device.id, device.pool_id, device.host, device.board, device.state)
        for device_id in device_ids
        if (device := devices.get(device_id)) is not None
    }


def _form_text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


async def _repositories(request: web.Request, principal: Principal | None) -> list[str]:
    """The repositories to pick from: those the reader may read (:mod:`kerrigan.web.reading`)."""
    async with request.config_dict[DATABASE].sessions() as db:
        known = await known_repositories(db)
    readable = await read_access(request, principal).readable(known)
    return [name for name in known if name in readable]


def _explained(
    text: str, path: str, inventory: Inventory, descriptions: Mapping[str, str], repository: str | None
) -> tuple[ManifestResult, Explanation, Resolution]:
    """The manifest parsed, resolved, and the resolution as a session would store it (through the same
    JSON document)."""
    parsed = parse_manifest(text, path)
    explanation = explain(parsed, inventory, repository=repository, check_vcpus=True)
    return parsed, explanation, Resolution.from_document(explanation_json(explanation, descriptions))


@routes.get("/explain")
async def explain_form(request: web.Request) -> web.Response:
    """The empty form."""
    principal = await page_reader(request)
    repositories = await _repositories(request, principal)
    chosen = request.query.get("repository", "")
    return await render(
        request,
        "explain.html",
        {
            "repositories": repositories,
            "repository": chosen if chosen in repositories else "",
            "path": DEFAULT_PATH,
            "manifest": "",
            "query": "",
            "field_errors": {},
            "answer": None,
        },
    )


@routes.post("/explain")
async def explain_post(request: web.Request) -> web.Response:
    """Resolve the posted manifest against the stored inventory and show the answer under the form."""
    principal = await page_reader(request)
    form = await request.post()
    await check_csrf(request, form)
    manifest = _form_text(form, "manifest").replace("\r\n", "\n")
    repository = _form_text(form, "repository").strip()
    path = _form_text(form, "path").strip() or DEFAULT_PATH
    query = _form_text(form, "q").strip()[:MAX_QUERY]
    repositories = await _repositories(request, principal)
    field_errors: dict[str, str] = {}
    if len(manifest.encode()) > MAX_BODY:
        field_errors["manifest"] = f"The manifest is over {MAX_BODY} bytes."
    if repository and repository not in repositories:
        field_errors["repository"] = "Kerrigan does not know this repository: pick one from the list."
    if len(path) > MAX_PATH or "\x00" in path:
        field_errors["path"] = f"A path is at most {MAX_PATH} characters."
    context: dict[str, Any] = {
        "repositories": repositories,
        "repository": repository,
        "path": path,
        "manifest": manifest,
        "query": query,
        "field_errors": field_errors,
        "answer": None,
    }
    if field_errors:
        return await render(request, "explain.html", context, status=400)

    async with request.config_dict[DATABASE].sessions() as db:
        inventory = await load_inventory(db)
        descriptions = await label_keys(db)
    # Parsing and resolving take a while for a large manifest or lab: not on the event loop.
    parsed, explanation, resolution = await asyncio.to_thread(
        _explained, manifest, path, inventory, descriptions, repository or None
    )
    latest = None
    if repository and parsed.name:
        async with request.config_dict[DATABASE].sessions() as db:
            latest = await latest_session(db, repository, parsed.name)
    facts = inventory_facts(inventory, named_devices(resolution))
    # A 10k-device lab: bounded.
    tasks = [bounded(task_view(task, facts, query)) for task in resolution.tasks]
    errors, warnings = resolution.errors, resolution.warnings
    context["answer"] = {
        "workflow": parsed.name,
        "exit_code": explanation.exit_code,
        "ok": explanation.exit_code == EXIT_OK,
        "invalid": explanation.exit_code == EXIT_INVALID,
        "errors": errors,
        "warnings": warnings,
        "tasks": tasks,
        "latest": latest,
        "devices": len(inventory.devices),
        "facts": facts,
        "source_lines": source_lines(manifest, errors, warnings, tasks),
    }
    return await render(request, "explain.html", context)
