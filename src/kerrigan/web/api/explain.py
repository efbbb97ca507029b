"""``POST /api/v1/explain``: the resolution ``kerrigan explain`` gives, against the stored inventory."""

from __future__ import annotations

import asyncio

from aiohttp import web

from kerrigan.core.explain import EXIT_CODE_HEADER, Explanation, explain, explanation_json, render_text
from kerrigan.core.inventory import Inventory, RepositoryGlobError, validate_repository
from kerrigan.core.manifest import parse_manifest
from kerrigan.store.inventory import load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.web import bodies
from kerrigan.web.auth import reader
from kerrigan.web.errors import bad_request
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

DEFAULT_PATH = ".kerrigan/workflows/manifest.yml"


@routes.post("/explain")
async def explain_manifest(request: web.Request) -> web.Response:
    """The manifest comes as ``{"manifest": "<yaml>", "path": "...", "repository": "owner/name"}`` or as
    the raw YAML body; with ``repository`` (or ``?repository=``, checked whenever given; a JSON body's own
    wins) the pools' ``repositories`` lists are applied for a session of that repository.

    The answer is the ``kerrigan explain`` JSON with status 200, also for an invalid manifest (its errors
    are in the document); ``exit_code`` carries what the command would exit with. With ``?format=text`` it
    is the command's text instead (``text/plain``), the exit code in the ``Kerrigan-Exit-Code`` header. No
    body at all (or only blank space) is a 400 naming ``manifest``.
    """
    await reader(request)
    answer_format = request.query.get("format", "json")
    if answer_format not in ("json", "text"):
        raise bad_request("format is json or text", field="format")
    repository: str | None = request.query.get("repository")
    if repository is not None:  # checked when given, whether or not a JSON body names one too
        repository = _repository(repository)
    if request.content_type == "application/json":
        body = await bodies.json_object(request, ("manifest", "path", "repository"))
        text = bodies.required(body, "manifest")
        if not isinstance(text, str):
            raise bad_request("manifest must be the manifest's YAML text", field="manifest")
        path = bodies.string(body.get("path", DEFAULT_PATH), "path", max_length=500)
        if "repository" in body:  # the body's wins over the query's (both checked)
            repository = _repository(body["repository"])
    else:
        if request.content_length is not None and request.content_length > bodies.MAX_BODY:
            raise bad_request(f"the manifest is over {bodies.MAX_BODY} bytes", field="manifest")
        text = await bodies.body_text(request)
        if not text.strip():  # nothing to explain: not the empty manifest's one error, with a 200
            raise bad_request(
                'send the manifest: its YAML as the body, or JSON {"manifest": "..."}', field="manifest"
            )
        path = DEFAULT_PATH
    async with request.config_dict[DATABASE].sessions() as session:
        inventory = await load_inventory(session)
        descriptions = await label_keys(session)
    # Parsing, resolving and rendering take a while for a large manifest or lab: not on the event loop.
    explanation = await asyncio.to_thread(_explained, text, path, inventory, repository)
    if answer_format == "text":
        rendered = await asyncio.to_thread(render_text, explanation, descriptions)
        return web.Response(text=rendered, headers={EXIT_CODE_HEADER: str(explanation.exit_code)})
    document = await asyncio.to_thread(explanation_json, explanation, descriptions)
    document["exit_code"] = explanation.exit_code
    return web.json_response(document)


def _explained(text: str, path: str, inventory: Inventory, repository: str | None) -> Explanation:
    """The explanation of the manifest ``text``."""
    return explain(parse_manifest(text, path), inventory, repository=repository, check_vcpus=True)


def _repository(value: object) -> str:
    """The ``repository`` a request names: an ``owner/name``, or a 400 naming the field."""
    if not isinstance(value, str):
        raise bad_request("repository must be a string: owner/name", field="repository")
    try:
        return validate_repository(value)
    except RepositoryGlobError as exc:
        raise bad_request(str(exc), field="repository", code="invalid_repository") from None
