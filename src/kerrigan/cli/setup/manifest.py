"""The App manifest ``kerrigan setup`` posts: ``app.yml`` with this lab's addresses filled in."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import yaml

from kerrigan.cli.usage import UsageError, read_input

APP_YML: Final = "app.yml"
WEBHOOK_PATH: Final = "/webhooks/github"
SIGN_IN_CALLBACK_PATH: Final = "/auth/callback"
_PACKAGE: Final = Path(__file__).resolve().parents[2]  # src/kerrigan, or site-packages/kerrigan


def shipped_manifest() -> Path:
    """``app.yml`` as a wheel ships it (inside the package), else the one at the top of the checkout."""
    packaged = _PACKAGE / APP_YML
    return packaged if packaged.is_file() else _PACKAGE.parents[1] / APP_YML


def load_manifest(path: Path) -> dict[str, Any]:
    """The manifest's YAML as a mapping; a UsageError naming the file otherwise."""
    try:
        document = yaml.safe_load(read_input(str(path), "manifest"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(
            f"manifest {path}{where}: not YAML ({getattr(exc, 'problem', None) or exc})"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("default_permissions"), dict):
        raise UsageError(f"manifest {path}: not a GitHub App manifest (no default_permissions mapping)")
    return document


def app_manifest(
    template: dict[str, Any], *, public_url: str, redirect_url: str, name: str | None = None
) -> dict[str, Any]:
    """``template`` for this lab: webhooks to ``public_url``, sign-in's callback there too, and the code of
    the manifest flow sent to ``redirect_url`` (the local setup server)."""
    manifest = copy.deepcopy(template)
    hook = dict(manifest.get("hook_attributes") or {})
    hook["url"] = public_url + WEBHOOK_PATH
    hook.setdefault("active", True)
    manifest["hook_attributes"] = hook
    manifest["redirect_url"] = redirect_url
    manifest["callback_urls"] = [public_url + SIGN_IN_CALLBACK_PATH]
    if name is not None:
        manifest["name"] = name
    return manifest
