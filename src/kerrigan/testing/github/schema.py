"""Requests checked against GitHub's own OpenAPI description of its REST API, as GitHub checks them.

The description (``shared/github-openapi/api.github.com.subset.json``) is found through
``KERRIGAN_GITHUB_OPENAPI`` or by looking upward from the current directory and from this package for
``shared/github-openapi/``. It is read and compiled once per process. Without it, or without ``jsonschema``
(a test extra: ``kerrigan demo`` runs without it), nothing is validated and a warning says so once.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kerrigan.testing.github.errors import GitHubError

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE: Final = "KERRIGAN_GITHUB_OPENAPI"
RELATIVE_PATH: Final = Path("shared") / "github-openapi" / "api.github.com.subset.json"
_BASE: Final = "urn:github-openapi"
_METHODS: Final = ("get", "post", "patch", "put", "delete")


def find_description(
    environ: Mapping[str, str] | None = None, starts: Iterable[Path] | None = None
) -> Path | None:
    """Where GitHub's description is: the environment's choice, else the nearest ``shared/github-openapi``
    above the current directory or this package (CI puts ``shared/`` beside the clone)."""
    environ = os.environ if environ is None else environ
    if environ.get(ENVIRONMENT_VARIABLE):
        chosen = Path(environ[ENVIRONMENT_VARIABLE])
        return chosen if chosen.is_file() else None
    for start in starts if starts is not None else (Path.cwd(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            candidate = folder / RELATIVE_PATH
            if candidate.is_file():
                return candidate
    return None


# Some of GitHub's limits are written only in a field's description ("The maximum size is 255 characters.").
_PROSE_LIMIT: Final = re.compile(r"The maximum size is (\d+) (characters|KB)\.")


def to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0's schema dialect turned into JSON Schema: ``nullable: true`` admits ``null``, and a
    string's maximum size written in its description becomes its ``maxLength``."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: to_json_schema(value) for key, value in node.items()}
    limit = _PROSE_LIMIT.search(str(node.get("description", ""))) if node.get("type") == "string" else None
    if limit is not None and "maxLength" not in converted:
        size, unit = int(limit.group(1)), limit.group(2)
        converted["maxLength"] = size * 1024 if unit == "KB" else size  # KB counted in characters: lenient
    if converted.pop("nullable", False) is not True:
        return converted
    if "$ref" in converted or "type" not in converted:  # a $ref's siblings are ignored: wrap it instead
        return {"anyOf": [converted, {"type": "null"}]}
    kind = converted["type"]
    converted["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
    if "enum" in converted and None not in converted["enum"]:
        converted["enum"] = [*converted["enum"], None]
    return converted


def _pointer(*parts: str) -> str:
    return "#/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def _where(error: Any) -> str:
    return "/".join(str(part) for part in error.absolute_path)


def describe(error: Any) -> str:
    """One validation error in GitHub's words (``"name" wasn't supplied.``, ``For 'status', ...``)."""
    if error.validator == "required":
        missing = re.match(r"'([^']+)' is a required property", error.message)
        field_name = missing.group(1) if missing else error.message
        where = _where(error)
        return f'"{field_name}" wasn\'t supplied.' + (f" (in '{where}')" if where else "")
    where = _where(error)
    return f"For '{where}', {error.message}." if where else f"{error.message}."


@dataclass
class Operation:
    """One operation of the description, with its validators compiled when first used."""

    method: str
    template: str
    operation_id: str
    pattern: re.Pattern[str]
    definition: dict[str, Any]
    _validators: dict[str, Any] = field(default_factory=dict)


class Description:
    """GitHub's description, ready to validate requests and answers."""

    def __init__(self, document: dict[str, Any], jsonschema: Any, referencing: Any) -> None:
        self._jsonschema = jsonschema
        self.document = to_json_schema(copy.deepcopy(document))
        resource = referencing.jsonschema.DRAFT4.create_resource(self.document)
        self._registry = referencing.Registry().with_resource(_BASE, resource)
        self.operations: list[Operation] = []
        for template, item in self.document["paths"].items():
            # {path} of the contents API spans folders; every other parameter is one path segment
            regex = re.sub(
                r"\\\{(\w+)\\\}", lambda m: ".*" if m.group(1) == "path" else "[^/]+", re.escape(template)
            )
            for method in _METHODS:
                if method in item:
                    self.operations.append(
                        Operation(
                            method.upper(),
                            template,
                            item[method]["operationId"],
                            re.compile(regex),
                            item[method],
                        )
                    )

    def operation(self, method: str, path: str) -> Operation | None:
        """The operation a request with this method and concrete path is."""
        for candidate in self.operations:
            if candidate.method == method.upper() and candidate.pattern.fullmatch(path):
                return candidate
        return None

    def _validator(self, operation: Operation, key: str, *parts: str) -> Any:
        if key not in operation._validators:
            node: Any = operation.definition
            for part in parts:
                node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                operation._validators[key] = None
            else:
                pointer = _pointer("paths", operation.template, operation.method.lower(), *parts)
                operation._validators[key] = self._jsonschema.Draft4Validator(
                    {"$ref": f"{_BASE}{pointer}"}, registry=self._registry
                )
        return operation._validators[key]

    def request_problem(self, operation: Operation, body: Any) -> str | None:
        """What GitHub would say is wrong with this JSON request body, or ``None``."""
        validator = self._validator(
            operation, "request", "requestBody", "content", "application/json", "schema"
        )
        if validator is None:
            return None
        error = self._jsonschema.exceptions.best_match(validator.iter_errors(body))
        return None if error is None else describe(error)

    def response_problems(self, operation: Operation, status: int, body: Any) -> list[str] | None:
        """Where an answer departs from the response schema of ``status`` (``None``: no schema for it)."""
        responses = operation.definition.get("responses", {})
        if str(status) not in responses:
            return None
        response = responses[str(status)]
        if "$ref" in response:  # a shared response (components/responses/...): point at it instead
            target = response["$ref"].removeprefix("#/")
            validator = self._jsonschema.Draft4Validator(
                {"$ref": f"{_BASE}#/{target}/content/application~1json/schema"}, registry=self._registry
            )
            if "application/json" not in self._resolve(target).get("content", {}):
                return None
        else:
            validator = self._validator(
                operation,
                f"response {status}",
                "responses",
                str(status),
                "content",
                "application/json",
                "schema",
            )
        if validator is None:
            return None
        return [f"{_where(error) or '(the body)'}: {error.message}" for error in validator.iter_errors(body)]

    def _resolve(self, pointer: str) -> dict[str, Any]:
        node: Any = self.document
        for part in pointer.split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        result: dict[str, Any] = node
        return result


@functools.cache
def _load(path: Path) -> Description | None:
    try:
        jsonschema = importlib.import_module("jsonschema")
        referencing = importlib.import_module("referencing")
        importlib.import_module("referencing.jsonschema")
    except ImportError:
        log.warning("jsonschema is not installed: the GitHub stand-in does not validate requests")
        return None
    document = json.loads(path.read_text(encoding="utf-8"))
    return Description(document, jsonschema, referencing)


@functools.cache
def _missing() -> None:
    log.warning(
        "%s not found (set %s): the GitHub stand-in does not validate requests",
        RELATIVE_PATH,
        ENVIRONMENT_VARIABLE,
    )


def github_description() -> Description | None:
    """GitHub's description for this process (read once), or ``None`` when it cannot be used."""
    path = find_description()
    if path is None:
        _missing()
        return None
    return _load(path.resolve())


def check_request_body(description: Description | None, method: str, path: str, body: Any) -> None:
    """Refuse a JSON request body the description refuses, with GitHub's 422."""
    operation = description.operation(method, path) if description is not None else None
    if description is None or operation is None:
        return
    problem = description.request_problem(operation, body)
    if problem is not None:
        raise GitHubError(422, f"Invalid request.\n\n{problem}")
