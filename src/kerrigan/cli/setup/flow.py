"""``kerrigan setup``: register the GitHub App through GitHub's App manifest flow, and write its settings.

A local page posts ``app.yml`` (with this lab's addresses) to GitHub; GitHub creates the App and sends the
browser back to the local server with a one-time code; the code is converted into the App's id, private
key, webhook secret and OAuth client, which go to ``--out`` (``kerrigan.env``) and a key file beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import sys
import webbrowser
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp

from kerrigan.cli.setup import env_file
from kerrigan.cli.setup.conversion import ConversionError, convert_code
from kerrigan.cli.setup.local_server import CALLBACK_PATH, Done, SetupError, SetupServer, listen
from kerrigan.cli.setup.manifest import app_manifest, load_manifest, shipped_manifest
from kerrigan.cli.usage import UsageError
from kerrigan.config import ENV_FILE
from kerrigan.core.logins import is_login

EXIT_FAILED: Final = 1  # GitHub did not hand over the App's credentials; nothing was written


@dataclass(frozen=True)
class SetupPlan:
    """What the flow needs, checked before anything starts."""

    github_url: str
    api_url: str
    public_url: str
    org: str | None
    name: str | None
    port: int
    out: Path
    key: Path
    force: bool
    template: dict[str, Any]

    @property
    def action(self) -> str:
        """Where the form posts the manifest (``state`` added by the server)."""
        if self.org:
            return f"{self.github_url}/organizations/{self.org}/settings/apps/new"
        return f"{self.github_url}/settings/apps/new"


def _url(flag: str, value: str | None, variable: str, default: str | None) -> str:
    """A flag's URL, else the environment's, else ``default``, without a trailing slash."""
    chosen = value if value is not None else (os.environ.get(f"KERRIGAN_{variable}") or "").strip() or default
    if chosen is None:
        raise UsageError(f"say where GitHub reaches Kerrigan: {flag} or KERRIGAN_{variable}")
    parts = urlsplit(chosen)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        named = flag if value is not None else f"KERRIGAN_{variable}"
        raise UsageError(f"{named} must be an http(s) URL, not {chosen[:80]!r}")
    return chosen.rstrip("/")


def plan_of(args: argparse.Namespace) -> SetupPlan:
    """The flow's inputs from the command line and the environment; a UsageError for any mistake."""
    github_url = _url("--github-url", args.github_url, "GITHUB_URL", env_file.GITHUB_URL)
    # github.com's API has a host of its own; GitHub Enterprise Server's is under /api/v3.
    api_default = env_file.GITHUB_API_URL if github_url == env_file.GITHUB_URL else f"{github_url}/api/v3"
    api_url = _url("--github-api-url", args.github_api_url, "GITHUB_API_URL", api_default)
    public_url = _url("--public-url", args.public_url, "PUBLIC_URL", None)
    if args.org is not None and not is_login(args.org):
        raise UsageError(f"--org {args.org!r} is not a GitHub organization's login")
    if args.name is not None and not 0 < len(args.name.strip()) <= 34:
        raise UsageError("--name must be 1 to 34 characters (GitHub's limit for an App's name)")
    if not (args.port.isascii() and args.port.isdigit() and int(args.port) <= 65535):
        raise UsageError(
            f"--port must be a port number from 0 (any free one) to 65535, not {args.port[:40]!r}"
        )
    out = Path(args.out).absolute()
    key = env_file.key_path_for(out)
    env_file.refuse_to_overwrite((out, key), force=args.force)
    template = load_manifest(Path(args.manifest) if args.manifest else shipped_manifest())
    return SetupPlan(
        github_url=github_url,
        api_url=api_url,
        public_url=public_url,
        org=args.org,
        name=args.name.strip() if args.name else None,
        port=int(args.port),
        out=out,
        key=key,
        force=args.force,
        template=template,
    )


async def run_setup(plan: SetupPlan, *, open_browser: bool) -> Done:
    """Serve the page, wait for GitHub's answer, convert its code and write the settings. Ctrl-C (or
    SIGTERM) cancels it, whatever the flow is waiting on."""
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, task.cancel)
    try:
        sock = listen(plan.port)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on 127.0.0.1:{plan.port}: {exc.strerror or exc} (pass --port another)"
        ) from None
    redirect_url = f"http://127.0.0.1:{sock.getsockname()[1]}{CALLBACK_PATH}"
    manifest = app_manifest(
        plan.template, public_url=plan.public_url, redirect_url=redirect_url, name=plan.name
    )
    state = secrets.token_urlsafe(24)

    async with aiohttp.ClientSession() as http:

        async def complete(code: str) -> Done:
            try:
                credentials = await convert_code(http, plan.api_url, code)
            except ConversionError as exc:
                raise SetupError(str(exc)) from None
            settings = env_file.settings_text(
                credentials,
                key_path=plan.key,
                public_url=plan.public_url,
                github_url=plan.github_url,
                api_url=plan.api_url,
                session_secret=secrets.token_hex(32),
            )
            try:
                env_file.write_settings(plan.out, plan.key, settings, credentials.pem, force=plan.force)
            except OSError as exc:
                raise SetupError(
                    f"cannot write {plan.out} or {plan.key}: {exc.strerror or exc}; the App "
                    f"{credentials.html_url} exists: generate a private key in its settings"
                ) from None
            return Done(
                credentials.name, f"{credentials.html_url}/installations/new", str(plan.out), str(plan.key)
            )

        server = SetupServer(
            sock,
            action=f"{plan.action}?{urlencode({'state': state})}",
            manifest=manifest,
            state=state,
            out=str(plan.out),
            complete=complete,
            refused=lambda why: print(f"kerrigan setup: refused {why}", file=sys.stderr, flush=True),
        )
        await server.start()
        try:
            print(
                f"Open {server.url} to register the GitHub App on {plan.github_url} "
                f"(webhooks to {manifest['hook_attributes']['url']}); waiting for GitHub's answer, "
                "Ctrl-C stops.",
                flush=True,
            )
            if open_browser:
                webbrowser.open(server.url)
            return await server.result
        finally:
            await server.close()


def setup(args: argparse.Namespace) -> int:
    """Run the flow for the command's arguments; the exit status."""
    plan = plan_of(args)
    try:
        done = asyncio.run(run_setup(plan, open_browser=not args.no_browser))
    except SetupError as exc:
        print(f"kerrigan setup: {exc}; nothing was written", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("kerrigan setup: stopped before GitHub answered; nothing was written", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {done.out} (the App's settings) and {done.key} (its private key), both mode 0600")
    print("next:")
    print(f"  1. install the App on the repositories that hold .kerrigan/workflows: {done.install_url}")
    print(f"  2. in {plan.out.parent}: kerrigan db upgrade, then kerrigan serve (it reads {plan.out.name})")
    if plan.out.name != ENV_FILE:
        print(
            f"     kerrigan serve reads {ENV_FILE} from its working directory: rename the file, or export it"
        )
    return 0
