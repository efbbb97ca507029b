"""What the pages' forms share: reading a posted form (sign-in, CSRF), re-rendering it with the error next to
its field, an edit held back for a second click, and the notice shown once after the redirect that
follows a change."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kerrigan.core.label_impact import LostDevices
from kerrigan.core.roles import (
    Principal,
)
from kerrigan.store.inventory import (
    NotFoundError,
)
from kerrigan.store.label_impact import WINDOW
from kerrigan.web.editing.edits import Edit, editor, weigh
from kerrigan.web.errors import ApiError
from kerrigan.web.signin import check_csrf, get_session, page_writer, redirect
from kerrigan.web.state import writing

# -- the pages' forms ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FormError:
    """A form a page re-renders (status 400) with the rule that failed next to the field, and what was
    typed kept in the inputs.

    ``form`` names the form on the page (``label-add``, ``label:sdk``, ``tag-add``, ``firmware``, ...),
    ``field`` the input the message belongs to.
    """

    form: str
    field: str
    message: str
    typed: Mapping[str, str]
    # A change of labels held back because it takes devices from tasks that ran lately: those tasks, and
    # where the form posts again to make the change anyway.
    lost: tuple[LostDevices, ...] = ()
    action: str = ""

    @property
    def status(self) -> int:
        """The status of the page that shows it: 409 for a change held back, else 400."""
        return 409 if self.lost else 400

    def at(self, form: str, field: str) -> bool:
        """Whether the message belongs next to ``field`` of ``form`` (a held-back change is shown above the
        forms, not next to a field)."""
        return not self.lost and (form, field) == (self.form, self.field)

    def typed_value(self, form: str, name: str, default: str = "") -> str:
        """What was typed into ``name`` of ``form``, or ``default`` for another form."""
        return self.typed.get(name, default) if form == self.form else default


def form_error(error: ApiError, form: str, typed: Mapping[str, str], fields: Mapping[str, str]) -> FormError:
    """The page's form error for a refused edit. ``fields`` maps the error's field to the input it belongs
    to, by its whole name or its first part (``firmware.channel``, then ``firmware``; ``owners[1]``, then
    ``owners``); an unknown field goes to the form's first input."""
    raw = error.field or ""
    field = fields.get(raw) or fields.get(raw.split(".")[0].split("[")[0]) or next(iter(fields.values()))
    return FormError(form, field, error.message, dict(typed))


def not_found(error: NotFoundError) -> ApiError:
    """A missing pool or device, as the pages' error page shows it (404)."""
    return ApiError(404, "not_found", str(error))


@dataclass(frozen=True, slots=True)
class PostedForm:
    """A page's POST: the signed-in user and the form's fields, its CSRF token checked."""

    principal: Principal
    fields: Mapping[str, Any]

    @classmethod
    async def read(cls, request: web.Request) -> PostedForm:
        """Sign-in first (else to /login), then the CSRF token (else a 403 page)."""
        principal = await page_writer(request)
        fields = await request.post()
        await check_csrf(request, fields)
        return cls(principal, fields)

    def text(self, name: str) -> str:
        """A text field as sent, or ``""`` when it is missing (or a file)."""
        value = self.fields.get(name)
        return value if isinstance(value, str) else ""


Rerender = Callable[[FormError], Awaitable[web.Response]]
CONFIRM = "yes"
"""The value of a form's ``confirm`` field that makes a change held back by :func:`weigh` anyway."""


def held_back_message(lost: tuple[LostDevices, ...]) -> str:
    """Why a page's change of labels waits for a second click."""
    days = WINDOW.days
    stranded = sum(1 for item in lost if item.unschedulable)
    text = f"This change takes devices from {len(lost)} task(s) that ran in the last {days} days"
    if stranded:
        text += f"; {stranded} of them would have none left and fail at once"
    return text + ". Change it anyway, or keep the labels as they are."


async def edit_from_page(
    request: web.Request,
    posted: PostedForm,
    edit: Edit,
    *,
    form: str,
    typed: Mapping[str, str],
    fields: Mapping[str, str],
    rerender: Rerender,
    done: str,
    notice: str,
    weighed: bool = False,
) -> web.Response:
    """Make a page's edit in one write transaction. A broken rule (400) rolls it back and re-renders the
    page with the message next to the field; a refusal (403) or a missing pool or device (404) is the error
    page; success redirects to ``done`` with ``notice`` shown there once.

    A ``weighed`` edit (of labels or tags) that takes devices from tasks that ran lately is rolled back
    too, and the page lists those tasks with a button that posts the form again with ``confirm=yes``."""
    try:
        if weighed and posted.text("confirm") != CONFIRM:
            found, kept = await weigh(
                request, posted.principal, edit, keep=lambda w: not w.lost, if_match=False
            )
            if not kept:
                message = held_back_message(found.lost)
                held = FormError(form, "", message, dict(typed), lost=found.lost, action=request.path)
                return await rerender(held)
        else:
            async with writing(request) as session:
                await edit(editor(request, session, posted.principal, if_match=False))
    except NotFoundError as exc:
        raise not_found(exc) from None
    except ApiError as exc:
        if exc.status not in (400, 422):
            raise
        return await rerender(form_error(exc, form, typed, fields))
    session_data = await get_session(request)
    session_data["notice"] = notice
    return redirect(done)


async def take_notice(request: web.Request) -> str | None:
    """The notice an edit left for the page it redirected to (shown once)."""
    session = await get_session(request)
    if "notice" not in session:  # popping would rewrite the cookie on every page
        return None
    notice = session.pop("notice")
    return notice if isinstance(notice, str) else None
