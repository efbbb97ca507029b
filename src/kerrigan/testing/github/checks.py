"""Check runs: create, update, get, and list those of a commit (GitHub's ``checks`` API)."""

from __future__ import annotations

import re
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode

from aiohttp import web

from kerrigan.testing.github.accounts import app_body
from kerrigan.testing.github.auth import authorized_repository
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL, node_id, now_iso
from kerrigan.testing.github.repositories import pull_minimal

if TYPE_CHECKING:
    from kerrigan.testing.github.records import FakeRepository
    from kerrigan.testing.github.server import GitHubStandIn

# What GitHub's prose documents beyond the schema (and what the schema says, for when it cannot be read).
SUMMARY_LIMIT: Final = 65_535
ANNOTATIONS_PER_REQUEST: Final = 50
ACTIONS_LIMIT: Final = 3
ACTION_FIELD_LIMITS: Final = {"label": 20, "description": 40, "identifier": 20}
REQUEST_STATUSES: Final = frozenset({"queued", "in_progress", "completed"})
CONCLUSIONS: Final = frozenset(
    {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out"}
)
ANNOTATION_LEVELS: Final = frozenset({"notice", "warning", "failure"})
ANNOTATION_FIELDS: Final = frozenset({"path", "start_line", "end_line", "annotation_level", "message"})
PER_PAGE_LIMIT: Final = 100


def check_request(body: Any, *, creating: bool) -> None:
    """Refuse a check run body as GitHub does; covers the prose limits and what the schema also says."""
    if not isinstance(body, dict):
        raise GitHubError(400, "Problems parsing JSON")
    if creating:
        if not body.get("name"):
            raise GitHubError(422, "name wasn't supplied.")
        if not re.fullmatch(r"[0-9a-f]{40}", str(body.get("head_sha", ""))):
            raise GitHubError(422, "No commit found for SHA: {}".format(body.get("head_sha")))
    status = body.get("status")
    if status is not None and status not in REQUEST_STATUSES:
        raise GitHubError(
            422, f"Invalid request.\n\n{status!r} is not a member of {sorted(REQUEST_STATUSES)}."
        )
    conclusion = body.get("conclusion")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise GitHubError(
            422, f"Invalid request.\n\n{conclusion!r} is not a member of {sorted(CONCLUSIONS)}."
        )
    if conclusion == "stale":  # in the schema's enum, but "only GitHub can set this"
        raise GitHubError(
            422, "Invalid request.\n\nonly GitHub sets a check run's conclusion to stale (after 14 days)."
        )
    if "external_id" in body and not isinstance(body["external_id"], str):
        raise GitHubError(
            422, f"Invalid request.\n\nFor 'external_id', {body['external_id']!r} is not of type 'string'."
        )
    if (status == "completed" or body.get("completed_at")) and conclusion is None:
        raise GitHubError(422, "Invalid request.\n\nNo conclusion was given for a completed check run.")
    output = body.get("output")
    if output is not None:
        if not isinstance(output, dict) or not output.get("title") or output.get("summary") is None:
            raise GitHubError(422, 'Invalid request.\n\n"title" and "summary" are required in output.')
        for key in ("summary", "text"):
            if len(str(output.get(key) or "")) > SUMMARY_LIMIT:
                raise GitHubError(
                    422,
                    f"Invalid request.\n\noutput.{key} is longer than {SUMMARY_LIMIT} characters.",
                )
        annotations = output.get("annotations") or []
        if len(annotations) > ANNOTATIONS_PER_REQUEST:
            raise GitHubError(
                422,
                f"Invalid request.\n\nOnly {ANNOTATIONS_PER_REQUEST} annotations are allowed per request.",
            )
        for annotation in annotations:
            if ANNOTATION_FIELDS - set(annotation) or annotation["annotation_level"] not in ANNOTATION_LEVELS:
                raise GitHubError(422, f"Invalid request.\n\nInvalid annotation: {annotation!r}.")
            columns = {"start_column", "end_column"} & set(annotation)
            if columns and annotation["start_line"] != annotation["end_line"]:
                raise GitHubError(
                    422,
                    "Invalid request.\n\nstart_column and end_column are only allowed on one line "
                    f"(start_line {annotation['start_line']}, end_line {annotation['end_line']}).",
                )
    actions = body.get("actions") or []
    if len(actions) > ACTIONS_LIMIT:
        raise GitHubError(422, f"Invalid request.\n\nOnly {ACTIONS_LIMIT} actions are allowed.")
    for action in actions:
        for key, limit in ACTION_FIELD_LIMITS.items():
            if not isinstance(action.get(key), str) or len(action[key]) > limit:
                raise GitHubError(422, f"Invalid request.\n\nInvalid action {action!r}: {key}.")


def check_run_body(github: GitHubStandIn, run: dict[str, Any]) -> dict[str, Any]:
    """The check run as GitHub answers it."""
    repo = github.repositories[run["repository"]]
    url = f"{github.url}/repos/{repo.full_name}/check-runs/{run['id']}"
    output = run["output"]
    pulls = [
        pull_minimal(github, repo, pull)
        for pull in repo.pulls.values()
        if pull["head"]["sha"] == run["head_sha"]
    ]
    return {
        "id": run["id"],
        "node_id": node_id("CR", run["id"]),
        "head_sha": run["head_sha"],
        "external_id": run["external_id"] or "",
        "url": url,
        "html_url": f"{HTML_URL}/{repo.full_name}/runs/{run['id']}",
        "details_url": run["details_url"] or f"{HTML_URL}/apps/{github.app_slug}",
        "status": run["status"],
        "conclusion": run["conclusion"],
        "started_at": run["started_at"],
        "completed_at": run["completed_at"],
        "output": {
            "title": output.get("title"),
            "summary": output.get("summary"),
            "text": output.get("text"),
            "annotations_count": len(output.get("annotations") or []),
            "annotations_url": f"{url}/annotations",
        },
        "name": run["name"],
        "check_suite": {"id": run["check_suite"]},
        "app": app_body(github),
        "pull_requests": pulls,
    }


def _run_of(github: GitHubStandIn, repo: FakeRepository, request: web.Request) -> dict[str, Any]:
    run = github.check_runs.get(int(request.match_info["check_run_id"]))
    if run is None or run["repository"] != repo.full_name:
        raise GitHubError(404, "Not Found")
    return run


def _complete(run: dict[str, Any], body: dict[str, Any]) -> None:
    # "Providing conclusion will automatically set the status parameter to completed."
    if body.get("conclusion") is not None:
        run["status"] = "completed"
    if run["status"] == "completed":
        run["completed_at"] = body.get("completed_at") or run["completed_at"] or now_iso()
    if body.get("started_at"):
        run["started_at"] = body["started_at"]


async def create_check_run(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /repos/{owner}/{repo}/check-runs``."""
    repo = authorized_repository(github, request)
    body = await request.json()
    if isinstance(body, dict) and not body.get("name"):
        raise GitHubError(422, "name wasn't supplied.")
    github.check_body(request, body)
    check_request(body, creating=True)
    check_run_id = next(github.ids)
    output = dict(body.get("output") or {})
    run: dict[str, Any] = {
        "id": check_run_id,
        "repository": repo.full_name,
        "name": body["name"],
        "head_sha": body["head_sha"],
        "status": body.get("status", "queued"),
        "conclusion": body.get("conclusion"),
        "details_url": body.get("details_url"),
        "external_id": body.get("external_id"),
        "started_at": body.get("started_at") or now_iso(),
        "completed_at": None,
        "check_suite": github.check_suites.setdefault((repo.full_name, body["head_sha"]), next(github.ids)),
        "output": {**output, "annotations": list(output.get("annotations") or [])},
        "actions": body.get("actions") or [],
        "updates": 0,
    }
    _complete(run, body)
    github.check_runs[check_run_id] = run
    return web.json_response(check_run_body(github, run), status=201)


async def update_check_run(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}``: annotations add up, the rest replaces."""
    repo = authorized_repository(github, request)
    run = _run_of(github, repo, request)
    body = await request.json()
    github.check_body(request, body)
    check_request(body, creating=False)
    for key in ("name", "status", "conclusion", "details_url", "external_id", "actions"):
        if key in body:
            run[key] = body[key]
    if "output" in body:
        annotations = run["output"]["annotations"] + list(body["output"].get("annotations") or [])
        run["output"] = {**body["output"], "annotations": annotations}
    _complete(run, body)
    run["updates"] += 1
    return web.json_response(check_run_body(github, run))


async def get_check_run(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/check-runs/{check_run_id}``."""
    repo = authorized_repository(github, request)
    return web.json_response(check_run_body(github, _run_of(github, repo, request)))


async def recorded_check_runs(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /_check-runs``: every check run as the stand-in holds it, each with all of its annotations
    (GitHub answers only their count). For tests that run the stand-in as a process of its own."""
    del request
    return web.json_response(list(github.check_runs.values()))


def _positive(request: web.Request, name: str, default: int) -> int:
    value = request.query.get(name, str(default))
    if not (value.isascii() and value.isdigit()) or len(value) > 9 or int(value) < 1:
        raise GitHubError(422, f"Invalid request.\n\n{name} must be a positive integer.")
    return int(value)


async def list_check_runs_for_ref(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/commits/{ref}/check-runs``, newest first, paged with Link headers."""
    repo = authorized_repository(github, request)
    ref = request.match_info["ref"]
    name = request.query.get("check_name")
    status = request.query.get("status")
    which = request.query.get("filter", "latest")
    if which not in ("latest", "all"):
        raise GitHubError(422, "Invalid request.\n\nfilter must be latest or all.")
    per_page = min(_positive(request, "per_page", 30), PER_PAGE_LIMIT)
    page = _positive(request, "page", 1)
    runs = [
        run
        for run in sorted(github.check_runs.values(), key=lambda run: -int(run["id"]))
        if run["repository"] == repo.full_name
        and run["head_sha"] == ref
        and (name is None or run["name"] == name)
        and (status is None or run["status"] == status)
    ]
    if which == "latest":  # the newest run of each name
        newest: dict[str, dict[str, Any]] = {}
        for run in runs:
            newest.setdefault(run["name"], run)
        runs = list(newest.values())
    last = max(1, -(-len(runs) // per_page))
    body = {
        "total_count": len(runs),
        "check_runs": [check_run_body(github, run) for run in runs[(page - 1) * per_page : page * per_page]],
    }
    links = _links(f"{github.url}{request.path}", dict(request.query), page, last, per_page)
    return web.json_response(body, headers={"Link": links} if links else None)


def _links(base: str, query: dict[str, str], page: int, last: int, per_page: int) -> str:
    def at(number: int) -> str:
        return base + "?" + urlencode({**query, "per_page": per_page, "page": number})

    rels = []
    if page < last:
        rels += [f'<{at(page + 1)}>; rel="next"', f'<{at(last)}>; rel="last"']
    if page > 1:
        rels += [f'<{at(min(page - 1, last))}>; rel="prev"', f'<{at(1)}>; rel="first"']
    return ", ".join(rels)


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """The check runs API."""
    router.add_post("/repos/{owner}/{repo}/check-runs", partial(create_check_run, github))
    router.add_patch("/repos/{owner}/{repo}/check-runs/{check_run_id}", partial(update_check_run, github))
    router.add_get("/repos/{owner}/{repo}/check-runs/{check_run_id}", partial(get_check_run, github))
    router.add_get("/repos/{owner}/{repo}/commits/{ref}/check-runs", partial(list_check_runs_for_ref, github))
    router.add_get("/_check-runs", partial(recorded_check_runs, github))
