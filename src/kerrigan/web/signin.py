"""Signing in to the web pages with GitHub, the browser session, and CSRF tokens.

Sign-in is the GitHub App's OAuth web flow: ``/login/github`` sends the browser to
``{GITHUB_URL}/login/oauth/authorize`` with a random ``state`` kept in the session; GitHub sends it back to
``/auth/callback`` with a code, which is exchanged at ``{GITHUB_URL}/login/oauth/access_token`` for a user
token; ``GET {GITHUB_API_URL}/user`` names the login. The session is an encrypted cookie (Fernet, keyed by
``KERRIGAN_SESSION_SECRET``), HttpOnly and SameSite=Lax, Secure when the public URL is https. Every form
carries the session's CSRF token, and every POST is checked against it.

A sign-in is a row on the server (:mod:`kerrigan.store.signins`): the cookie carries its random id, and
every request that needs the user reads the row, so Sign out (which ends it) signs out every copy of the
cookie, on every replica. Where the browser goes after signing in is a path on this site only
(:mod:`kerrigan.core.redirects`).

Only the people the lab lets in may sign in (:mod:`kerrigan.web.membership`): a login GitHub names is
checked before its sign-in is made (a refusal is a page saying who may sign in and why not, and is
audited), and again on the first request an hour after it was last confirmed; a login that may no longer
sign in has its sign-ins ended.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp
from aiohttp import web
from cryptography.fernet import Fernet, InvalidToken

from kerrigan import __version__
from kerrigan.config import Settings
from kerrigan.core.redirects import local_path
from kerrigan.core.roles import Principal
from kerrigan.core.sign_in import Outcome
from kerrigan.store.signins import (
    SignIn,
    create_signin,
    end_signin,
    end_signins_of,
    mark_checked,
    purge_signins,
    signed_in,
)
from kerrigan.web.membership import admit, audit_refusal, check_due, in_grace, recheck, who_may_sign_in
from kerrigan.web.state import DATABASE, SETTINGS, writing

log = logging.getLogger(__name__)

COOKIE_NAME = "kerrigan_session"
SESSION_MAX_AGE_S = 8 * 60 * 60
MAX_LOGIN_LENGTH = 100  # the column's width; GitHub's own limit is 39
HTTP = web.AppKey("signin_http", aiohttp.ClientSession)
GITHUB_API_VERSION = "2022-11-28"  # the same as kerrigan.github.client's (the web layer may not import it)


def github_headers(settings: Settings, accept: str = "application/vnd.github+json") -> dict[str, str]:
    """The headers GitHub asks for on every request: a media type, the API version, a User-Agent naming
    the App."""
    agent = f"kerrigan/{__version__}"
    if settings.github_app_id:
        agent += f" (GitHub App {settings.github_app_id})"
    return {"Accept": accept, "X-GitHub-Api-Version": GITHUB_API_VERSION, "User-Agent": agent}


class BrowserSession(dict[str, Any]):
    """What the session cookie holds; written back only when changed."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(data or {})
        self.changed = False
        self.ended = False

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.changed = True

    def pop(self, key: str, default: Any = None) -> Any:
        self.changed = True
        return super().pop(key, default)

    def renew(self, **values: Any) -> None:
        """Start over with only ``values`` (on sign-in: nothing from before it carries over)."""
        self.clear()
        self.update(values)
        self.changed = True

    def end(self) -> None:
        """Sign out: the cookie is removed."""
        self.clear()
        self.ended = True


SESSION = web.RequestKey("browser_session", BrowserSession)
COOKIE_KEY = web.AppKey("session_cookie_key", Fernet)


class SignInRequired(Exception):  # noqa: N818 -- a redirect, not a fault
    """The page needs a signed-in user: the browser is sent to the sign-in page."""


class Forbidden(Exception):  # noqa: N818 -- an answer
    """The signed-in user may not do this; the message says who may."""


class SignInRefused(Exception):  # noqa: N818 -- an answer
    """GitHub named someone this lab does not let in: the page says who may sign in and why not."""

    def __init__(self, login: str, reason: str, who_may: str) -> None:
        super().__init__(reason)
        self.login = login
        self.reason = reason
        self.who_may = who_may


def session_key(settings: Settings) -> bytes:
    """The cookie's key: from KERRIGAN_SESSION_SECRET, or a random one (sign-ins end on restart)."""
    if settings.session_secret is None:
        log.warning("KERRIGAN_SESSION_SECRET is not set: sign-ins last until the server restarts")
        secret = secrets.token_bytes(32)
    else:
        secret = settings.session_secret.encode()
    return hashlib.sha256(secret).digest()  # 32 bytes; aiohttp-session base64-encodes them for Fernet


def cookie_fernet(settings: Settings) -> Fernet:
    """The cookie's cipher (authenticated encryption, with a timestamp for the session's age)."""
    return Fernet(base64.urlsafe_b64encode(session_key(settings)))


async def get_session(request: web.Request) -> BrowserSession:
    """This browser's session, read from its cookie (an expired, forged or garbled one is empty)."""
    if SESSION not in request:
        data: Any = {}
        cookie = request.cookies.get(COOKIE_NAME)
        if cookie:
            try:
                raw = request.config_dict[COOKIE_KEY].decrypt(cookie.encode(), ttl=SESSION_MAX_AGE_S)
                data = json.loads(raw)
            except (InvalidToken, ValueError):
                data = {}
        request[SESSION] = BrowserSession(data if isinstance(data, dict) else {})
    return request[SESSION]


@web.middleware
async def session_cookies(request: web.Request, handler: Any) -> web.StreamResponse:
    """Write the session back to its cookie when a page changed it."""
    response: web.StreamResponse = await handler(request)
    session = request.get(SESSION)
    if session is None or not (session.changed or session.ended):
        return response
    settings = request.config_dict[SETTINGS]
    if session.ended:
        response.del_cookie(COOKIE_NAME, path="/")
        return response
    token = request.config_dict[COOKIE_KEY].encrypt(json.dumps(dict(session)).encode()).decode()
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="Lax",  # sent on GitHub's redirect back (a top-level GET), not on other sites' posts
        secure=urlsplit(settings.public_url).scheme == "https",
    )
    return response


def redirect(location: str) -> web.Response:
    """A 302 that the session middleware can still put a cookie on."""
    return web.Response(status=302, headers={"Location": location})


def sign_in_configured(settings: Settings) -> bool:
    """Whether the OAuth app's client id and secret are set."""
    return bool(settings.github_client_id and settings.github_client_secret)


@dataclass(frozen=True, slots=True)
class _SignedIn:
    principal: Principal | None


# Kept for one request only: a sign-out on another replica must count from the next request on.
_SIGNED_IN = web.RequestKey("signed_in", _SignedIn)


async def page_principal(request: web.Request) -> Principal | None:
    """The signed-in user of this browser, or None: the cookie's sign-in must exist on the server, not have
    ended (Sign out) and not have expired, and its login must still be one the lab lets in (asked of
    GitHub again an hour after it was last confirmed)."""
    if _SIGNED_IN in request:
        return request[_SIGNED_IN].principal
    session = await get_session(request)
    signin_id = session.get("signin")
    principal = None
    if isinstance(signin_id, str):
        database = request.config_dict[DATABASE]
        now = database.clock()
        async with database.sessions() as db:
            found = await signed_in(db, signin_id, now)
        if found is None:
            session.pop("signin")  # ended or expired: the cookie stops naming it
        elif not check_due(found.checked_at, now) or await _still_allowed(request, signin_id, found, now):
            principal = Principal(
                found.login, admin=found.login.lower() in request.config_dict[SETTINGS].admins
            )
    request[_SIGNED_IN] = _SignedIn(principal)
    return principal


async def _still_allowed(request: web.Request, signin_id: str, found: SignIn, now: datetime) -> bool:
    """The hourly check of a sign-in: confirmed, it counts for another hour; refused, every sign-in of
    its login ends (audited) and the sign-in page says why; unanswered, it counts within the grace time
    and not after it (the sign-in is kept, and counts again once GitHub answers)."""
    answer = await recheck(request, found.login)
    session = await get_session(request)
    if answer.allowed:
        async with writing(request) as db:
            await mark_checked(db, signin_id, now)
        return True
    if answer.outcome is Outcome.REFUSED:
        async with writing(request) as db:
            ended = await end_signins_of(db, found.login, now)
        if ended:  # a request at the same moment may have ended them already: audited once
            await audit_refusal(request, found.login, answer.words, ended=True)
            log.info("%s may no longer sign in: %s", found.login, answer.words)
        session.pop("signin")
        session["refused"] = answer.words
        return False
    if in_grace(found.checked_at, now):
        return True
    session["refused"] = answer.words
    return False


async def page_reader(request: web.Request) -> Principal | None:
    """Anyone signed in reads; anonymous users only when public read is on."""
    principal = await page_principal(request)
    if principal is None and not request.config_dict[SETTINGS].public_read:
        raise SignInRequired
    return principal


async def page_writer(request: web.Request) -> Principal:
    """A signed-in user (what they may change is checked by the page)."""
    principal = await page_principal(request)
    if principal is None:
        raise SignInRequired
    return principal


async def csrf_token(request: web.Request) -> str:
    """The session's CSRF token, made on first use."""
    session = await get_session(request)
    token = session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


async def check_csrf(request: web.Request, form: Any) -> None:
    """Refuse a form whose CSRF token is not this session's (a forged or stale post)."""
    session = await get_session(request)
    expected = session.get("csrf")
    sent = form.get("csrf") if form is not None else None
    if (
        not isinstance(expected, str)
        or not isinstance(sent, str)
        or not secrets.compare_digest(expected, sent)
    ):
        raise Forbidden("the form is stale or was not sent from this site: reload the page and try again")


async def login_github(request: web.Request) -> web.Response:
    """Send the browser to GitHub's authorize page with a fresh state."""
    settings = request.config_dict[SETTINGS]
    if not sign_in_configured(settings):
        return redirect("/login")
    session = await get_session(request)
    state = secrets.token_urlsafe(24)
    session["oauth_state"] = state
    session["next"] = local_path(request.query.get("next"))
    query = urlencode(
        {
            "client_id": settings.github_client_id,
            "redirect_uri": f"{settings.public_url}/auth/callback",
            "state": state,
            "allow_signup": "false",
        }
    )
    return redirect(f"{settings.github_url}/login/oauth/authorize?{query}")


async def auth_callback(request: web.Request) -> web.Response:
    """GitHub sends the browser back: check the state, exchange the code, learn the login."""
    settings = request.config_dict[SETTINGS]
    session = await get_session(request)
    expected = session.pop("oauth_state", None)
    state, code = request.query.get("state"), request.query.get("code")
    if not isinstance(expected, str) or not state or not secrets.compare_digest(expected, state) or not code:
        raise Forbidden("the sign-in could not be checked (its state does not match): sign in again")
    http = request.config_dict[HTTP]
    async with http.post(
        f"{settings.github_url}/login/oauth/access_token",
        data={
            "client_id": settings.github_client_id,
            "client_secret": settings.github_client_secret,
            "code": code,
            "redirect_uri": f"{settings.public_url}/auth/callback",
        },
        # The OAuth endpoint answers form-encoded unless asked for plain JSON.
        headers=github_headers(settings, accept="application/json"),
    ) as response:
        answer = await response.json(content_type=None)
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str):
        raise Forbidden(f"GitHub did not sign you in: {answer.get('error_description') or 'no token'}")
    async with http.get(
        f"{settings.github_api_url}/user",
        headers={"Authorization": f"Bearer {token}", **github_headers(settings)},
    ) as response:
        user = await response.json(content_type=None)
    login = user.get("login") if isinstance(user, dict) else None
    if not isinstance(login, str) or not 0 < len(login) <= MAX_LOGIN_LENGTH:
        raise Forbidden("GitHub did not say who you are")
    answer, new = await admit(request, login)
    if not answer.allowed:
        if new:
            await audit_refusal(request, login, answer.words)
            log.info("%s was refused sign-in: %s", login, answer.words)
        raise SignInRefused(login, answer.words, await who_may_sign_in(request))
    next_page = session.get("next")
    database = request.config_dict[DATABASE]
    async with writing(request) as db:
        now = database.clock()
        # Sign-ins are few: clearing out the old ones here costs one indexed delete per sign-in.
        await purge_signins(db, now)
        signin_id = await create_signin(db, login, now, timedelta(seconds=SESSION_MAX_AGE_S))
    session.renew(signin=signin_id)  # nothing from before the sign-in carries over (no fixation)
    log.info("%s signed in", login)
    return redirect(local_path(next_page if isinstance(next_page, str) else None))


async def logout(request: web.Request) -> web.Response:
    """Sign out (a POST with the CSRF token, so another site cannot sign you out)."""
    form = await request.post()
    await check_csrf(request, form)
    session = await get_session(request)
    signin_id = session.get("signin")
    if isinstance(signin_id, str):
        database = request.config_dict[DATABASE]
        async with writing(request) as db:
            await end_signin(db, signin_id, database.clock())
    session.end()
    return redirect("/login")
