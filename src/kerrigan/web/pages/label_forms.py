"""The label, tag and health-check forms of the pool page and the device page: the same handlers for either
subject, given what differs between them (the route prefix, the :class:`~kerrigan.web.editing.Editor`
methods, the page re-rendered on a broken rule, where a success redirects, the word in the notices).

With ``{base}`` the subject's page (``/pools/{pool_id}`` or ``/devices/{device_id}``):

- ``POST {base}/labels`` (``key``, ``value``): add a label, or give one a new value
- ``POST {base}/labels/{key}`` (``value``): change its value; an empty one removes it
- ``POST {base}/labels/{key}/delete``: remove it
- ``POST {base}/tags`` (``tag``): add a tag
- ``POST {base}/tags/{tag}/delete``: remove it
- ``POST {base}/health-check/edit`` (``run``, ``every``, ``timeout_s``, ``vcpus``): set its own health check
- ``POST {base}/health-check/remove``: remove its own health check (a device's pool's applies again)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from kerrigan.core.inventory import Pool
from kerrigan.core.roles import Principal, may_administer, may_edit_labels
from kerrigan.web import editing
from kerrigan.web.editing import Editor, FormError, PostedForm

LABEL_FIELDS = {"key": "key", "value": "value"}
TAG_FIELDS = {"tag": "tag"}
CHECK_INPUTS = ("run", "every", "timeout_s", "vcpus")
CHECK_FIELDS = {f"health_check.{name}": name for name in CHECK_INPUTS} | {"health_check": "run"}

ErrorPage = Callable[[web.Request, Principal, FormError], Awaitable[web.Response]]
"""The subject's page re-rendered for the person who posted, with the form's error."""


async def form_context(
    request: web.Request,
    principal: Principal | None,
    pool: Pool,
    *,
    labels: Collection[str],
    admin_forms: Collection[str],
    approved: Mapping[str, str],
    error: FormError | None,
    base: str,
) -> dict[str, Any]:
    """What a page with these forms renders them with: whether the user may edit the labels and tags (owners
    of ``pool`` and admins) and use the admin forms, the approved keys, the error and whether it sits at one
    of the forms shown, the notice of the last change, and the page's path the forms post below."""
    may_edit = principal is not None and may_edit_labels(principal, pool)
    may_admin = principal is not None and may_administer(principal)
    shown = (
        ({"label-add", "tag-add", "health-check"} | {f"label:{key}" for key in labels}) if may_edit else set()
    )
    if may_admin:
        shown |= set(admin_forms)
    return {
        "may_edit": may_edit,
        "may_admin": may_admin,
        "approved": approved,
        "error": error,
        "error_placed": error is not None and not error.lost and error.form in shown,
        "notice": None if error is not None else await editing.take_notice(request),
        "base": base,
    }


class SetLabel(Protocol):
    """The :class:`Editor` method that sets one label of the subject (``Editor.set_pool_label``)."""

    def __call__(
        self, editor: Editor, subject_id: str, key: str, value: str, /, *, empty_removes: bool = True
    ) -> Awaitable[object]: ...


class SetTag(Protocol):
    """The :class:`Editor` method that adds or removes one tag of the subject (``Editor.set_pool_tag``)."""

    def __call__(self, editor: Editor, subject_id: str, tag: str, /, *, add: bool) -> Awaitable[object]: ...


class Update(Protocol):
    """The :class:`Editor` method that changes fields of the subject (``Editor.update_pool``)."""

    def __call__(self, editor: Editor, subject_id: str, body: Mapping[str, Any], /) -> Awaitable[object]: ...


def check_document(posted: PostedForm) -> dict[str, object]:
    """The health check a form posted, as the API's body gives it: blank inputs left out, whole numbers as
    numbers (anything else is passed on for the rule to name)."""
    document: dict[str, object] = {}
    for name in CHECK_INPUTS:
        text = posted.text(name).strip()
        if text:
            document[name] = int(text) if name != "run" and text.isdigit() and text.isascii() else text
    return document


@dataclass(frozen=True, slots=True)
class FormSubject:
    """A pool or a device as its page's forms edit it: :meth:`add_routes` adds the label and tag forms,
    :meth:`edit_from_page` serves those and the subject's other forms."""

    noun: str  # "pool" or "device": the notices' word, and the route's id is "{noun}_id"
    prefix: str  # "/pools" or "/devices": the subject's page is "{prefix}/{id}"
    page: ErrorPage
    set_label: SetLabel
    set_tag: SetTag
    update: Update

    @property
    def base(self) -> str:
        """The route of the subject's page, which the forms post below."""
        return f"{self.prefix}/{{{self.noun}_id}}"

    def add_routes(self, routes: web.RouteTableDef) -> None:
        """The five label and tag forms' routes, on ``routes``."""
        routes.post(f"{self.base}/labels")(self.add_label)
        routes.post(f"{self.base}/labels/{{key}}")(self.change_label)
        routes.post(f"{self.base}/labels/{{key}}/delete")(self.remove_label)
        routes.post(f"{self.base}/tags")(self.add_tag)
        routes.post(f"{self.base}/tags/{{tag}}/delete")(self.remove_tag)
        routes.post(f"{self.base}/health-check/edit")(self.set_health_check)
        routes.post(f"{self.base}/health-check/remove")(self.remove_health_check)

    async def edit_from_page(
        self,
        request: web.Request,
        posted: PostedForm,
        edit: editing.Edit,
        *,
        form: str,
        typed: Mapping[str, str],
        fields: Mapping[str, str],
        notice: str,
        weighed: bool = False,
    ) -> web.Response:
        """:func:`editing.edit_from_page` for this subject: a broken rule (or a ``weighed`` change that takes
        devices from tasks that ran lately) re-renders its page, a success redirects back to it."""

        async def rerender(error: FormError) -> web.Response:
            return await self.page(request, posted.principal, error)

        return await editing.edit_from_page(
            request,
            posted,
            edit,
            form=form,
            typed=typed,
            fields=fields,
            rerender=rerender,
            done=f"{self.prefix}/{self._subject_id(request)}",
            notice=notice,
            weighed=weighed,
        )

    async def add_label(self, request: web.Request) -> web.Response:
        """Add a label (or give an existing one a new value); an empty value is refused here."""
        posted = await PostedForm.read(request)
        subject_id, key, value = self._subject_id(request), posted.text("key"), posted.text("value")

        async def edit(editor: Editor) -> object:
            return await self.set_label(editor, subject_id, key, value, empty_removes=False)

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form="label-add",
            typed={"key": key, "value": value},
            fields=LABEL_FIELDS,
            notice=f"Label {key.lower()}={value} set on {self.noun} {subject_id}.",
            weighed=True,
        )

    async def change_label(self, request: web.Request) -> web.Response:
        """Change a label's value; an empty value removes the label (the seed's rule)."""
        posted = await PostedForm.read(request)
        subject_id, key, value = self._subject_id(request), request.match_info["key"], posted.text("value")

        async def edit(editor: Editor) -> object:
            return await self.set_label(editor, subject_id, key, value)

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form=f"label:{key}",
            typed={"value": value},
            fields=LABEL_FIELDS,
            notice=f"Label {key} set to {value}." if value else f"Label {key} removed.",
            weighed=True,
        )

    async def remove_label(self, request: web.Request) -> web.Response:
        """Remove a label (from a device: the pool's label of that key, if any, applies again)."""
        posted = await PostedForm.read(request)
        subject_id, key = self._subject_id(request), request.match_info["key"]

        async def edit(editor: Editor) -> object:
            return await self.set_label(editor, subject_id, key, "")

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form=f"label:{key}",
            typed={},
            fields=LABEL_FIELDS,
            notice=f"Label {key} removed from {self.noun} {subject_id}.",
            weighed=True,
        )

    async def add_tag(self, request: web.Request) -> web.Response:
        """Add a tag."""
        posted = await PostedForm.read(request)
        subject_id, tag = self._subject_id(request), posted.text("tag")

        async def edit(editor: Editor) -> object:
            return await self.set_tag(editor, subject_id, tag, add=True)

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form="tag-add",
            typed={"tag": tag},
            fields=TAG_FIELDS,
            notice=f"Tag {tag.lower()} added to {self.noun} {subject_id}.",
            weighed=True,
        )

    async def remove_tag(self, request: web.Request) -> web.Response:
        """Remove a tag (from a device: the pool's tags stay)."""
        posted = await PostedForm.read(request)
        subject_id, tag = self._subject_id(request), request.match_info["tag"]

        async def edit(editor: Editor) -> object:
            return await self.set_tag(editor, subject_id, tag, add=False)

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form=f"tag:{tag}",
            typed={},
            fields=TAG_FIELDS,
            notice=f"Tag {tag} removed from {self.noun} {subject_id}.",
            weighed=True,
        )

    async def set_health_check(self, request: web.Request) -> web.Response:
        """Give the subject a health check of its own (admins and the pool's owners)."""
        posted = await PostedForm.read(request)
        subject_id, document = self._subject_id(request), check_document(posted)

        async def edit(editor: Editor) -> object:
            return await self.update(editor, subject_id, {"health_check": document})

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form="health-check",
            typed={name: posted.text(name) for name in CHECK_INPUTS},
            fields=CHECK_FIELDS,
            notice=f"Health check of {self.noun} {subject_id} saved.",
        )

    async def remove_health_check(self, request: web.Request) -> web.Response:
        """Remove the subject's own health check."""
        posted = await PostedForm.read(request)
        subject_id = self._subject_id(request)

        async def edit(editor: Editor) -> object:
            return await self.update(editor, subject_id, {"health_check": None})

        return await self.edit_from_page(
            request,
            posted,
            edit,
            form="health-check",
            typed={},
            fields=CHECK_FIELDS,
            notice=f"Health check removed from {self.noun} {subject_id}.",
        )

    def _subject_id(self, request: web.Request) -> str:
        return request.match_info[f"{self.noun}_id"]
