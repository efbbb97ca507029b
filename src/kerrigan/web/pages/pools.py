"""The pools: ``/pools`` lists them with filters, ``/pools/{pool_id}`` is the pool editor.

Every edit is a plain form that posts, with the CSRF token, below the page it sits on, and goes through
:mod:`kerrigan.web.editing` (the code the REST API uses: roles, the label rules, approved keys, the audit
log). Owners and System Admins (the label and tag forms, the same as the device page's, are
:mod:`kerrigan.web.pages.label_forms`):

- ``POST /pools/{pool_id}/labels`` (``key``, ``value``): add a label, or give one a new value
- ``POST /pools/{pool_id}/labels/{key}`` (``value``): change its value; an empty one removes it
- ``POST /pools/{pool_id}/labels/{key}/delete``: remove it
- ``POST /pools/{pool_id}/tags`` (``tag``): add a tag
- ``POST /pools/{pool_id}/tags/{tag}/delete``: remove it

System Admins only:

- ``POST /pools/{pool_id}/firmware`` (``channel``, ``base_version``; empty means none)
- ``POST /pools/{pool_id}/owners`` (``owners``: GitHub logins separated by commas or spaces)
- ``POST /pools/{pool_id}/repositories`` (``repositories``: globs on ``owner/name``, one a line; none lets
  every installed repository use the pool)

A success redirects back to the editor with a notice. A broken rule re-renders the editor with status 400,
the rule next to the field and what was typed kept, and changes nothing. A user who may not make the edit
does not see its form, and a forged post gets the 403 page.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from kerrigan.core.inventory import DeviceState, Pool, effective_pool_labels, implicit_pool_labels
from kerrigan.core.roles import Principal
from kerrigan.store.inventory import NotFoundError, StoredDevice, get_pool, list_devices, list_pools
from kerrigan.store.lab_health import broken_checks
from kerrigan.store.label_keys import label_keys
from kerrigan.web import editing
from kerrigan.web.editing import Editor, FormError, PostedForm
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.label_forms import FormSubject, form_context
from kerrigan.web.pages.rendering import render
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

STATES = tuple(DeviceState)

_FIRMWARE_FIELDS = {"firmware.channel": "channel", "firmware.base_version": "base_version"}
_OWNERS_FIELDS = {"owners": "owners"}
_REPOSITORIES_FIELDS = {"repositories": "repositories"}


# -- the list --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveFilter:
    """A filter in force, and the list's address without it."""

    kind: str  # "label" or "tag"
    value: str
    without: str


@dataclass(frozen=True, slots=True)
class PoolSummary:
    """One row of the list."""

    pool: Pool
    devices: int
    states: Mapping[str, int]


def _active(labels: Sequence[str], tags: Sequence[str]) -> list[ActiveFilter]:
    everything = [("label", value) for value in labels] + [("tag", value) for value in tags]
    active = []
    for index, (kind, value) in enumerate(everything):
        rest = everything[:index] + everything[index + 1 :]
        active.append(ActiveFilter(kind, value, "/pools" + (f"?{urlencode(rest)}" if rest else "")))
    return active


def _valid_filters(request: web.Request, kind: str) -> tuple[list[str], FormError | None]:
    """The ``kind`` filters of the query that hold (the form's empty input is none), and the first error:
    a bad filter is shown next to its input and left out, the others still apply."""
    kept: list[str] = []
    error: FormError | None = None
    for raw in request.query.getall(kind, []):
        value = raw.strip()
        if not value:
            continue
        labels, tags = ([value], []) if kind == "label" else ([], [value])
        try:
            editing.parse_filters(labels, tags)
        except ApiError as exc:
            error = error or FormError("filters", kind, exc.message, {kind: value})
            continue
        kept.append(value)
    return kept, error


@routes.get("/pools")
async def pools_index(request: web.Request) -> web.Response:
    """Every pool with its owners, labels, tags and device counts by state; ``?label=key=value`` and
    ``?tag=`` (repeatable) keep the pools whose effective labels and tags match, as the API's list does."""
    await page_reader(request)
    good_labels, label_error = _valid_filters(request, "label")
    good_tags, tag_error = _valid_filters(request, "tag")
    error = label_error or tag_error
    wanted = editing.parse_filters(good_labels, good_tags)
    async with request.config_dict[DATABASE].sessions() as session:
        pools = await list_pools(session)
        devices = await list_devices(session)
    states: dict[str, Counter[str]] = {}
    for stored in devices:
        states.setdefault(stored.device.pool_id, Counter())[stored.device.state.value] += 1
    rows = [
        PoolSummary(stored.pool, stored.devices, states.get(stored.pool.id, Counter()))
        for stored in pools
        if wanted.matches(effective_pool_labels(stored.pool), stored.pool.tags)
    ]
    context = {
        "rows": rows,
        "total": len(pools),
        "states": STATES,
        "filters": _active(good_labels, good_tags),
        "error": error,
    }
    return await render(request, "pools.html", context, 400 if error else 200)


# -- the editor ------------------------------------------------------------------------------------


async def _editor_page(
    request: web.Request, principal: Principal | None, error: FormError | None = None
) -> web.Response:
    pool_id = request.match_info["pool_id"]
    async with request.config_dict[DATABASE].sessions() as session:
        try:
            stored = await get_pool(session, pool_id)
            devices: list[StoredDevice] = await list_devices(session, pool_id)
        except NotFoundError as exc:
            raise editing.not_found(exc) from None
        approved = await label_keys(session)
        broken = await broken_checks(session, request.config_dict[DATABASE].clock(), pool_id)
    pool = stored.pool
    context: dict[str, Any] = {
        "pool": pool,
        "implicit": implicit_pool_labels(pool),
        "devices": devices,
        "states": Counter(d.device.state.value for d in devices),
        "all_states": STATES,
        "broken_checks": broken,
        **await form_context(
            request,
            principal,
            pool,
            labels=pool.labels,
            admin_forms={"firmware", "owners", "repositories"},
            approved=approved,
            error=error,
            base=f"/pools/{pool.id}",
        ),
    }
    return await render(request, "pool.html", context, error.status if error else 200)


@routes.get("/pools/{pool_id}")
async def pool_page(request: web.Request) -> web.Response:
    """The pool editor: forms only for what the signed-in user may change."""
    return await _editor_page(request, await page_reader(request))


POOL = FormSubject(
    noun="pool",
    prefix="/pools",
    page=_editor_page,
    set_label=Editor.set_pool_label,
    set_tag=Editor.set_pool_tag,
    update=Editor.update_pool,
)
"""The pool as the editor's forms edit it."""

POOL.add_routes(routes)


@routes.post("/pools/{pool_id}/firmware")
async def set_firmware(request: web.Request) -> web.Response:
    """Set the firmware policy (admins); an empty channel or base version means none."""
    posted = await PostedForm.read(request)
    pool_id = request.match_info["pool_id"]
    channel, base_version = posted.text("channel").strip(), posted.text("base_version").strip()
    firmware = {"channel": channel or None, "base_version": base_version or None}

    async def edit(editor: Editor) -> object:
        return await editor.update_pool(pool_id, {"firmware": firmware})

    return await POOL.edit_from_page(
        request,
        posted,
        edit,
        form="firmware",
        typed={"channel": channel, "base_version": base_version},
        fields=_FIRMWARE_FIELDS,
        notice=f"Firmware policy of pool {pool_id} saved.",
    )


def _logins(text: str) -> list[str]:
    return [login for login in re.split(r"[\s,]+", text) if login]


@routes.post("/pools/{pool_id}/owners")
async def set_owners(request: web.Request) -> web.Response:
    """Set the owners (admins): GitHub logins separated by commas or spaces; none leaves it to admins."""
    posted = await PostedForm.read(request)
    pool_id, owners = request.match_info["pool_id"], posted.text("owners")

    async def edit(editor: Editor) -> object:
        return await editor.update_pool(pool_id, {"owners": _logins(owners)})

    return await POOL.edit_from_page(
        request,
        posted,
        edit,
        form="owners",
        typed={"owners": owners},
        fields=_OWNERS_FIELDS,
        notice=f"Owners of pool {pool_id} saved.",
    )


@routes.post("/pools/{pool_id}/repositories")
async def set_repositories(request: web.Request) -> web.Response:
    """Set which repositories may use the pool (admins): globs on ``owner/name``, one a line (blank lines
    are skipped); none lets every installed repository."""
    posted = await PostedForm.read(request)
    pool_id, typed = request.match_info["pool_id"], posted.text("repositories")
    globs = [line.strip() for line in typed.splitlines() if line.strip()]

    async def edit(editor: Editor) -> object:
        return await editor.update_pool(pool_id, {"repositories": globs})

    return await POOL.edit_from_page(
        request,
        posted,
        edit,
        form="repositories",
        typed={"repositories": typed},
        fields=_REPOSITORIES_FIELDS,
        notice=f"Repositories that may use pool {pool_id} saved.",
    )
