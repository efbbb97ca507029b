"""Changing the inventory on a person's behalf: the one implementation behind the REST API's writes
(``web/api/inventory.py``) and the forms of the pool and device pages (``web/pages/pools.py``,
``devices.py``).

Every edit (:mod:`~kerrigan.web.editing.edits`) checks the role first, then the label rules, and saves
through the store, which writes the audit log; the fields of a body are read and checked in
:mod:`~kerrigan.web.editing.fields`. A rule broken is an :class:`~kerrigan.web.errors.ApiError`: 400 naming
the field and the rule, 403 saying who may. The API turns it into JSON, a page into the message next to the
field it belongs to (:mod:`~kerrigan.web.editing.forms`); either way nothing has changed, because the
caller's transaction is rolled back. The list filters, shared by the pages and the API, are
:mod:`~kerrigan.web.editing.filters`.
"""

from __future__ import annotations

from kerrigan.web.editing.edits import (
    OWNER_FIELDS,
    Edit,
    Editor,
    Weighed,
    change_by,
    editor,
    weigh,
)
from kerrigan.web.editing.fields import (
    DEVICE_PATCH_FIELDS,
    POOL_PATCH_FIELDS,
    device_from,
    device_state,
    future_time,
    health_check,
    pool_exists,
    pool_from,
    repository_globs,
    state_until,
)
from kerrigan.web.editing.filters import Filters, parse_filters
from kerrigan.web.editing.forms import (
    CONFIRM,
    FormError,
    PostedForm,
    Rerender,
    edit_from_page,
    form_error,
    held_back_message,
    not_found,
    take_notice,
)

__all__ = [
    "CONFIRM",
    "DEVICE_PATCH_FIELDS",
    "OWNER_FIELDS",
    "POOL_PATCH_FIELDS",
    "Edit",
    "Editor",
    "Filters",
    "FormError",
    "PostedForm",
    "Rerender",
    "Weighed",
    "change_by",
    "device_from",
    "device_state",
    "edit_from_page",
    "editor",
    "form_error",
    "future_time",
    "health_check",
    "held_back_message",
    "not_found",
    "parse_filters",
    "pool_exists",
    "pool_from",
    "repository_globs",
    "state_until",
    "take_notice",
    "weigh",
]
