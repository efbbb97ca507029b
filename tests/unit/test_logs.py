"""One event a line, as JSON or text, with the bound context, and never a secret: ``kerrigan.logs``."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import secrets
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
import structlog
from aiohttp import web
from yarl import URL

from kerrigan.logs import REDACTED, AccessLogger, Redactor, configure_logging, fresh_log_context
from kerrigan.testing.github import generate_app_key
from kerrigan.testing.waiting import wait_until

SECRET = "webhook-secret-8c1f0e"


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as standard error is when a person runs Kerrigan."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """Each test configures the process's logging: put back what pytest and the other tests had."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.contextvars.clear_contextvars()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


def logged(log_format: str, write: Callable[[logging.Logger], None], **options: Any) -> str:
    """What ``write`` logs through ``logging.getLogger("kerrigan.test")``, once configured so."""
    stream = options.pop("stream", None) or io.StringIO()
    configure_logging(log_format, stream=stream, **options)
    write(logging.getLogger("kerrigan.test"))
    return str(stream.getvalue())


def events(text: str) -> list[dict[str, Any]]:
    """The JSON lines of ``text``, each one object."""
    parsed = [json.loads(line) for line in text.splitlines()]
    assert all(isinstance(event, dict) for event in parsed)
    return parsed


def fails_with(log: logging.Logger, message: str) -> None:
    try:
        raise RuntimeError(message)
    except RuntimeError:
        log.exception("the step failed")


# -- JSON and text -------------------------------------------------------------------------------------


def test_json_writes_one_object_a_line_with_the_level_logger_time_and_bound_context() -> None:
    def write(log: logging.Logger) -> None:
        structlog.contextvars.bind_contextvars(delivery_id="72d3162e", repository="octo/firmware")
        log.info("delivery %s stored", "72d3162e")
        structlog.contextvars.bind_contextvars(session_id=17)
        log.warning("session %d waits", 17)

    first, second = events(logged("json", write))
    assert first["event"] == "delivery 72d3162e stored"
    assert (first["level"], first["logger"]) == ("info", "kerrigan.test")
    assert (first["delivery_id"], first["repository"]) == ("72d3162e", "octo/firmware")
    assert "session_id" not in first
    assert (second["level"], second["session_id"]) == ("warning", 17)
    stamp = datetime.fromisoformat(first["timestamp"])
    assert stamp.utcoffset() is not None
    assert stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_json_lines_from_structlog_loggers_carry_the_same_fields() -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    structlog.contextvars.bind_contextvars(runner_host="rig-01")
    structlog.get_logger("kerrigan.dispatch").info("offered", job_id=42)
    [event] = events(stream.getvalue())
    assert event["event"] == "offered"
    assert (event["level"], event["logger"]) == ("info", "kerrigan.dispatch")
    assert (event["runner_host"], event["job_id"]) == ("rig-01", 42)
    assert "timestamp" in event


def test_a_json_traceback_stays_inside_its_line() -> None:
    text = logged("json", lambda log: fails_with(log, "flash timed out"))
    [event] = events(text)
    assert event["level"] == "error"
    assert event["exception"].startswith("Traceback (most recent call last):")
    assert "RuntimeError: flash timed out" in event["exception"]


def test_text_is_one_line_an_event_with_its_fields_and_the_traceback_below_its_line() -> None:
    def write(log: logging.Logger) -> None:
        structlog.contextvars.bind_contextvars(delivery_id="72d3162e")
        log.info("first")
        log.warning("second %s", "event")
        fails_with(log, "flash timed out")
        log.info("fourth")

    lines = logged("text", write).splitlines()
    assert "first" in lines[0]
    assert "delivery_id=72d3162e" in lines[0]
    assert "second event" in lines[1]
    assert "the step failed" in lines[2]
    assert lines[3] == "Traceback (most recent call last):"
    assert lines[-2] == "RuntimeError: flash timed out"
    assert "fourth" in lines[-1]
    headed = [line for line in lines if "[kerrigan.test]" in line]
    assert len(headed) == 4  # each event on a line of its own, with its logger
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])


@pytest.mark.parametrize(
    ("stream", "json_expected"), [(Terminal(), False), (io.StringIO(), True)], ids=["terminal", "pipe"]
)
def test_auto_is_text_on_a_terminal_and_json_otherwise(stream: io.StringIO, json_expected: bool) -> None:
    text = logged("auto", lambda log: log.info("ready"), stream=stream)
    [line] = text.splitlines()
    if json_expected:
        assert json.loads(line)["event"] == "ready"
    else:
        assert "ready" in line
        assert not line.startswith("{")


def test_extra_fields_are_fields_of_the_event() -> None:
    text = logged("json", lambda log: log.info("GET /pools 200", extra={"bytes": 512, "ms": 3.5}))
    [event] = events(text)
    assert (event["bytes"], event["ms"]) == (512, 3.5)
    text = logged("text", lambda log: log.info("GET /pools 200", extra={"bytes": 512}))
    assert "bytes=512" in text


def test_the_level_leaves_out_what_is_below_it() -> None:
    def write(log: logging.Logger) -> None:
        log.debug("noise")
        log.info("said")

    assert [event["event"] for event in events(logged("json", write))] == ["said"]
    assert [event["event"] for event in events(logged("json", write, level=logging.DEBUG))] == [
        "noise",
        "said",
    ]


# -- secrets -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_secret_given_is_replaced_wherever_it_occurs(log_format: str) -> None:
    def write(log: logging.Logger) -> None:
        structlog.contextvars.bind_contextvars(repository=f"octo/{SECRET}")
        log.info(f"in the message: {SECRET}")
        log.info("in the arguments: %s", SECRET)
        log.info("in a field", extra={"header": f"sha256={SECRET}", "form": {"client_secret": SECRET}})
        fails_with(log, f"in the exception: {SECRET}")

    text = logged(log_format, write, secrets=[SECRET])
    assert SECRET not in text
    assert text.count(REDACTED) >= 6  # message, argument, two fields, bound context, exception message
    if log_format == "json":
        message, argument, field, failure = events(text)
        assert message["event"] == f"in the message: {REDACTED}"
        assert argument["event"] == f"in the arguments: {REDACTED}"
        assert field["header"] == f"sha256={REDACTED}"
        assert f"RuntimeError: in the exception: {REDACTED}" in failure["exception"]


def test_a_secret_in_a_source_line_of_the_traceback_is_replaced(tmp_path: Path) -> None:
    source = tmp_path / "settings_check.py"
    source.write_text(f"def check():\n    raise KeyError({SECRET!r})\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("settings_check", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def write(log: logging.Logger) -> None:
        try:
            module.check()
        except KeyError:
            log.exception("lookup failed")

    [event] = events(logged("json", write, secrets=[SECRET]))
    assert f"raise KeyError('{REDACTED}')" in event["exception"]  # the frame's line, as the file has it
    assert SECRET not in json.dumps(event)


def test_the_longest_secret_wins_where_one_holds_another() -> None:
    redactor = Redactor(["session-abcdef", "session-abcdef-and-more"])
    assert redactor.text("x session-abcdef-and-more y") == f"x {REDACTED} y"


_PRIVATE_KEY = generate_app_key()[0]
TOKEN_SHAPES = {
    "installation token": "ghs_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4",
    "personal token": "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a",
    "user token": "gho_" + "abcdefghijklmnopqrstuvwx",
    "fine-grained token": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "API token": "kgn_" + secrets.token_urlsafe(24),
    "runner token": "kgr_" + secrets.token_urlsafe(24),
    "JWT": jwt.encode({"iss": "4242", "iat": 0, "exp": 600}, "a-key-of-thirty-two-bytes-length", "HS256"),
    "bearer credential": "Bearer " + "f" * 40,
    "token credential": "token " + "0123456789abcdef0123",
    "private key": _PRIVATE_KEY.strip(),
}


@pytest.mark.parametrize("shape", TOKEN_SHAPES.values(), ids=TOKEN_SHAPES.keys())
def test_token_shapes_are_replaced_though_nobody_named_them(shape: str) -> None:
    text = logged("json", lambda log: log.warning("GitHub answered 401 for %s", shape))
    [event] = events(text)
    assert event["event"] == f"GitHub answered 401 for {REDACTED}"
    assert shape not in text


def test_no_line_of_a_private_key_survives_even_one_cut_short() -> None:
    cut = _PRIVATE_KEY[: len(_PRIVATE_KEY) // 2]  # an error message that kept only the start of the key

    def write(log: logging.Logger) -> None:
        log.error("bad key %s", _PRIVATE_KEY)
        log.error("bad key %s", cut)

    text = logged("text", write)
    body = [line for line in _PRIVATE_KEY.splitlines() if line and not line.startswith("-----")]
    assert body
    assert not [line for line in body if line in text]


@pytest.mark.parametrize("word", ["main", "ci", "push", "abcde"])
def test_secrets_shorter_than_six_characters_are_not_replaced_so_words_survive(word: str) -> None:
    text = logged("json", lambda log: log.info("%s on %s", word, "board-a"), secrets=[word])
    [event] = events(text)
    assert event["event"] == f"{word} on board-a"


def test_a_secret_of_six_characters_is_replaced() -> None:
    [event] = events(logged("json", lambda log: log.info("abcdef in here"), secrets=["abcdef", "", "ab"]))
    assert event["event"] == f"{REDACTED} in here"


def test_ordinary_text_passes_unchanged() -> None:
    words = "flash on board-a of octo/firmware at 3f2a9c1d took 12.5 s; token expired, bearer missing"
    assert Redactor([SECRET]).text(words) == words


# -- the server's access log and its context ----------------------------------------------------------


async def test_the_access_log_has_method_path_and_status_but_never_the_query(
    aiohttp_server: Callable[..., Any], aiohttp_client: Callable[..., Any]
) -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)

    async def callback(request: web.Request) -> web.Response:
        return web.Response(status=302, headers={"Location": "/pools"})

    app = web.Application()
    app.router.add_get("/auth/callback", callback)
    client = await aiohttp_client(await aiohttp_server(app, access_log_class=AccessLogger))
    # Neither is token-shaped: only the access logger keeps them out.
    code, state = "oauthcode0123456789", "state-9f8e7d6c"
    response = await client.get(f"/auth/callback?code={code}&state={state}", allow_redirects=False)
    assert response.status == 302
    await wait_until(stream.getvalue, what="the access log line")
    [event] = events(stream.getvalue())
    assert event["event"] == "GET /auth/callback 302"
    assert event["logger"] == "aiohttp.access"
    assert isinstance(event["bytes"], int)
    assert isinstance(event["ms"], float)
    for hidden in (code, state, "?", "code="):
        assert hidden not in stream.getvalue()


async def test_a_request_path_cannot_write_a_line_of_its_own_into_the_text_log(
    aiohttp_server: Callable[..., Any],
) -> None:
    stream = io.StringIO()
    configure_logging("text", stream=stream)
    server = await aiohttp_server(web.Application(), access_log_class=AccessLogger)
    forged = "%0A2026-12-01T00:00:00Z%20%5Berror%20%20%20%20%5D%20database%20wiped%20%5Bkerrigan%5D"
    async with (
        aiohttp.ClientSession() as http,
        http.get(URL(f"{server.make_url('/x')}{forged}", encoded=True)) as response,
    ):
        assert response.status == 404
    await wait_until(stream.getvalue, what="the access log line")
    assert len(stream.getvalue().splitlines()) == 1, stream.getvalue()


def _context_app() -> web.Application:
    """``/bind`` binds a field and logs; ``/plain`` only logs; both answer the client's port, so a test
    sees that they came over one connection."""
    log = logging.getLogger("kerrigan.test")

    async def bind(request: web.Request) -> web.Response:
        structlog.contextvars.bind_contextvars(delivery_id="first-request")
        log.info("bound")
        return web.json_response(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]

    async def plain(request: web.Request) -> web.Response:
        log.info("plain")
        return web.json_response(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]

    app = web.Application(middlewares=[fresh_log_context])
    app.router.add_get("/bind", bind)
    app.router.add_get("/plain", plain)
    return app


def handlers_events(text: str) -> list[dict[str, Any]]:
    """The events the handlers logged (the test server writes an access log line too)."""
    return [event for event in events(text) if event["logger"] == "kerrigan.test"]


async def test_what_one_request_binds_is_not_on_the_next_requests_lines_on_a_kept_alive_connection(
    aiohttp_client: Callable[..., Any],
) -> None:
    # aiohttp runs each request in a task of its own, on a copy of the connection's context; this holds the
    # line to that, the next test is the case the middleware itself is for.
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    client = await aiohttp_client(_context_app())
    first = await (await client.get("/bind")).json()
    second = await (await client.get("/plain")).json()
    assert first == second  # one kept-alive connection
    bound, plain = handlers_events(stream.getvalue())
    assert (bound["event"], bound["delivery_id"]) == ("bound", "first-request")
    assert plain["event"] == "plain"
    assert "delivery_id" not in plain


async def test_what_was_bound_where_the_server_started_is_not_on_its_requests_lines(
    aiohttp_client: Callable[..., Any],
) -> None:
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    # The server's connections take their context from where it started listening: without the
    # middleware this binding would name every request's lines.
    structlog.contextvars.bind_contextvars(runner_host="rig-01")
    client = await aiohttp_client(_context_app())
    structlog.contextvars.clear_contextvars()
    await (await client.get("/plain")).json()
    await (await client.get("/plain")).json()
    lines = handlers_events(stream.getvalue())
    assert [event["event"] for event in lines] == ["plain", "plain"]
    assert not [event for event in lines if "runner_host" in event]
