"""The web pages: server-rendered with Jinja2 (aiohttp-jinja2), every edit a plain form, a little
JavaScript to sort and filter tables in place, stream output and show a device's live console. DESIGN.md's
routes: ``/login``, ``/auth/callback``, ``/logout``, ``/pools``, ``/pools/{id}``, ``/devices``,
``/devices/{id}``, ``/sessions``, ``/sessions/{id}``, ``/explain``, ``/queue``, ``/runners``, ``/audit``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import aiohttp_jinja2
import jinja2
from aiohttp import web

from kerrigan.config import Settings
from kerrigan.core.redirects import local_path
from kerrigan.web import signin
from kerrigan.web.membership import who_may_sign_in
from kerrigan.web.pages import (
    audit,
    device_hands,
    devices,
    explain,
    history,
    job_files,
    lab_health,
    pools,
    queue,
    runners,
    sessions,
)
from kerrigan.web.pages.rendering import filters, page_errors, render
from kerrigan.web.state import SETTINGS

HERE = Path(__file__).resolve().parent.parent


async def login_page(request: web.Request) -> web.Response:
    """The sign-in page (the only page anonymous users see, unless public read is on); after a sign-in
    was ended because its login may no longer sign in, it says why, and who may."""
    settings = request.config_dict[SETTINGS]
    principal = await signin.page_principal(request)  # the hourly check may end the sign-in here
    refused = (await signin.get_session(request)).pop("refused", None) if principal is None else None
    return await render(
        request,
        "login.html",
        {
            "configured": signin.sign_in_configured(settings),
            "next": local_path(request.query.get("next"), "/pools"),
            "github_url": settings.github_url,
            "refused": refused if isinstance(refused, str) else None,
            "who_may": await who_may_sign_in(request) if isinstance(refused, str) else None,
        },
    )


async def home(request: web.Request) -> web.Response:
    """The pools are the lab's front page."""
    raise web.HTTPFound("/pools")


def setup_pages(app: web.Application, settings: Settings) -> None:
    """Templates, static files, the session cookie, sign-in and every page, on ``app``."""
    environment = aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(filters())

    def static(filename: str) -> str:
        # The file's URL with a hash of its contents, so a browser never keeps an old copy.
        return str(app.router["static"].url_for(filename=filename))

    environment.globals["static"] = static
    app[signin.COOKIE_KEY] = signin.cookie_fernet(settings)
    app.middlewares.append(signin.session_cookies)
    app.middlewares.append(page_errors)

    async def http_client(app: web.Application) -> AsyncIterator[None]:
        async with aiohttp.ClientSession() as http:
            app[signin.HTTP] = http
            yield

    app.cleanup_ctx.append(http_client)
    app.router.add_static("/static/", HERE / "static", name="static", append_version=True)
    app.router.add_get("/", home)
    app.router.add_get("/login", login_page)
    app.router.add_get("/login/github", signin.login_github)
    app.router.add_get("/auth/callback", signin.auth_callback)
    app.router.add_post("/logout", signin.logout)
    for module in (
        pools,
        history,
        devices,
        device_hands,
        sessions,
        job_files,
        explain,
        queue,
        runners,
        lab_health,
        audit,
    ):
        app.router.add_routes(module.routes)
