"""``kerrigan setup`` as an operator runs it: a real process, its local page driven as a browser would, and
the GitHub stand-in on loopback playing GitHub's part of the App manifest flow."""

from __future__ import annotations

import asyncio
import html
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from kerrigan.config import Settings, read_env_file
from kerrigan.github.client import app_jwt
from kerrigan.testing.github import GitHubStandIn

PUBLIC_URL = "https://lab.example.com"


def _environment(github: GitHubStandIn) -> dict[str, str]:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("KERRIGAN_")}
    return environ | {"KERRIGAN_GITHUB_API_URL": github.url}


@dataclass
class Setup:
    """A running ``kerrigan setup`` and its local page (``url`` carries the page's token, ``base`` not)."""

    process: asyncio.subprocess.Process
    url: str
    base: str

    async def finish(self) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.process.communicate(), timeout=30)
        assert self.process.returncode is not None
        return self.process.returncode, out.decode(), err.decode()


@pytest.fixture
async def stand_in() -> AsyncIterator[GitHubStandIn]:
    async with GitHubStandIn() as github:
        yield github


async def start_setup(github: GitHubStandIn, out: Path, *options: str) -> Setup:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "kerrigan", "setup", "--github-url", github.url, "--public-url", PUBLIC_URL),
        *("--port", "0", "--out", str(out), "--no-browser", *options),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_environment(github),
        cwd=out.parent,
    )
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
    found = re.search(r"Open ((http://127\.0\.0\.1:\d+/)\?token=[\w-]{32}) ", line)
    if found is None:
        process.kill()
        _, err = await process.communicate()
        pytest.fail(f"no page address in {line!r}: {err.decode()}")
    return Setup(process, found.group(1), found.group(2))


async def read_form(http: aiohttp.ClientSession, page_url: str) -> tuple[str, str]:
    """The start page's form: where it posts, and the manifest it posts."""
    return await read_form_as(http, page_url, {})


async def read_form_as(
    http: aiohttp.ClientSession, page_url: str, headers: dict[str, str]
) -> tuple[str, str]:
    """The start page's form, asked for with these headers."""
    async with http.get(page_url, headers=headers) as page:
        assert page.status == 200
        text = await page.text()
    action = re.search(r'<form method="post" action="([^"]+)"', text)
    manifest = re.search(r'<input type="hidden" name="manifest" value="([^"]+)"', text)
    assert action is not None
    assert manifest is not None
    return html.unescape(action.group(1)), html.unescape(manifest.group(1))


async def submit(http: aiohttp.ClientSession, action: str, manifest: str) -> str:
    """Post the form to the stand-in as the browser would; where GitHub sends the browser back."""
    async with http.post(action, data={"manifest": manifest}, allow_redirects=False) as created:
        assert created.status == 302, await created.text()
        return created.headers["Location"]


async def test_setup_registers_the_app_and_writes_settings_serve_can_mint_tokens_with(
    stand_in: GitHubStandIn, tmp_path: Path
) -> None:
    out = tmp_path / "kerrigan.env"
    setup = await start_setup(stand_in, out, "--name", "Kerrigan lab A")
    async with aiohttp.ClientSession() as http:
        action, manifest = await read_form(http, setup.url)
        assert action.startswith(f"{stand_in.url}/settings/apps/new?state=")
        back = await submit(http, action, manifest)
        assert back.startswith(f"{setup.base}setup/callback?")
        async with http.get(back) as done:
            assert done.status == 200
            page = await done.text()
    status, printed, errors = await setup.finish()
    assert status == 0, errors

    (app,) = stand_in.created_apps.values()
    assert app.name == "Kerrigan lab A"
    assert app.permissions["merge_queues"] == "read"  # app.yml is what was posted
    assert "merge_group" in app.events
    assert f"{app.slug}/installations/new" in page
    assert f"https://github.com/apps/{app.slug}/installations/new" in printed

    key = tmp_path / "kerrigan.pem"
    assert read_env_file(out) == {
        "KERRIGAN_GITHUB_APP_ID": str(app.id),
        "KERRIGAN_GITHUB_PRIVATE_KEY_PATH": str(key),
        "KERRIGAN_WEBHOOK_SECRET": app.webhook_secret,
        "KERRIGAN_GITHUB_CLIENT_ID": app.client_id,
        "KERRIGAN_GITHUB_CLIENT_SECRET": app.client_secret,
        "KERRIGAN_SESSION_SECRET": read_env_file(out)["KERRIGAN_SESSION_SECRET"],
        "KERRIGAN_PUBLIC_URL": PUBLIC_URL,
        "KERRIGAN_GITHUB_URL": stand_in.url,
        "KERRIGAN_GITHUB_API_URL": stand_in.url,
    }
    assert len(read_env_file(out)["KERRIGAN_SESSION_SECRET"]) == 64
    assert key.read_text() == app.pem
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(out.stat().st_mode) == 0o600

    # What kerrigan serve reads from the file mints an installation token of the new App.
    settings = Settings.from_env(read_env_file(out))
    assert settings.github_app_id is not None
    assert settings.github_private_key is not None
    stand_in.add_installation(77, "lab-a", app_id=settings.github_app_id)
    token = app_jwt(settings.github_app_id, settings.github_private_key, time.time())
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{settings.github_api_url}/app/installations/77/access_tokens",
            headers={"Authorization": f"Bearer {token}"},
        ) as minted,
    ):
        assert minted.status == 201


async def test_an_answer_without_the_setups_state_is_refused(stand_in: GitHubStandIn, tmp_path: Path) -> None:
    out = tmp_path / "kerrigan.env"
    setup = await start_setup(stand_in, out)
    async with aiohttp.ClientSession() as http:
        action, manifest = await read_form(http, setup.url)
        back = await submit(http, action, manifest)
        code = parse_qs(urlsplit(back).query)["code"][0]
        forged = f"{setup.base}setup/callback?code={code}&state=someone-elses"
        async with http.get(forged) as refused:
            assert refused.status == 403
    assert not out.exists()
    assert stand_in.manifest_codes  # the code was never converted
    setup.process.send_signal(signal.SIGINT)
    status, _, errors = await setup.finish()
    assert status == 1
    assert "refused an answer" in errors
    assert "nothing was written" in errors
    assert not out.exists()


async def stop(setup: Setup) -> str:
    """Ctrl-C the command (nothing written); what it printed on stderr."""
    setup.process.send_signal(signal.SIGINT)
    status, _, errors = await setup.finish()
    assert status == 1
    assert "nothing was written" in errors
    return errors


def state_of(action: str) -> str:
    return parse_qs(urlsplit(action).query)["state"][0]


@pytest.mark.parametrize("address", ["", "?token=", "?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "?tok=1"])
async def test_the_page_without_its_token_is_refused_and_shows_no_state(
    stand_in: GitHubStandIn, tmp_path: Path, address: str
) -> None:
    setup = await start_setup(stand_in, tmp_path / "kerrigan.env")
    async with aiohttp.ClientSession() as http:
        async with http.get(setup.base + address) as refused:
            assert refused.status == 403
            text = await refused.text()
        action, _ = await read_form(http, setup.url)  # a wrong token did not use up the right one
    assert state_of(action) not in text
    assert "<form" not in text
    assert "refused the page" in await stop(setup)


async def test_the_pages_token_opens_it_in_one_browser_and_no_other_reader(
    stand_in: GitHubStandIn, tmp_path: Path
) -> None:
    setup = await start_setup(stand_in, tmp_path / "kerrigan.env")
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        action, _ = await read_form(browser, setup.url)
        assert (await read_form(browser, setup.url))[0] == action  # the person reloads the page
        assert (await read_form(browser, setup.base))[0] == action
    async with aiohttp.ClientSession() as other, other.get(setup.url) as refused:
        assert refused.status == 403
        text = await refused.text()
    assert state_of(action) not in text
    assert "already opened" in text
    assert "already opened" in await stop(setup)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",
        "127.0.0.1.evil.example:{port}",
        "127.0.0.1:{other}",
        "[::1]:{port}",
        "LOCALHOST.:{port}",
    ],
)
async def test_a_request_naming_another_host_is_refused(
    stand_in: GitHubStandIn, tmp_path: Path, host: str
) -> None:
    """DNS rebinding: an attacker's name that resolves to 127.0.0.1 reaches the port, but names itself."""
    out = tmp_path / "kerrigan.env"
    setup = await start_setup(stand_in, out)
    port = urlsplit(setup.base).port
    assert port is not None
    foreign = {"Host": host.format(port=port, other=port + 1)}
    async with aiohttp.ClientSession() as http:
        async with http.get(setup.url, headers=foreign) as refused:
            assert refused.status == 403
            assert "<form" not in await refused.text()
        action, manifest = await read_form(http, setup.url)
        back = await submit(http, action, manifest)
        async with http.get(back, headers=foreign) as refused:
            assert refused.status == 403
        assert stand_in.manifest_codes  # the code was not converted
        async with http.get(back) as done:  # GitHub's answer through the right host still works
            assert done.status == 200
    status, _, errors = await setup.finish()
    assert status == 0, errors
    assert "refused" in errors
    assert out.exists()


async def test_the_page_answers_to_localhost_too(stand_in: GitHubStandIn, tmp_path: Path) -> None:
    setup = await start_setup(stand_in, tmp_path / "kerrigan.env")
    port = urlsplit(setup.base).port
    async with aiohttp.ClientSession() as http:
        action, _ = await read_form_as(http, setup.url, {"Host": f"localhost:{port}"})
    assert action.startswith(f"{stand_in.url}/settings/apps/new?state=")
    await stop(setup)


async def test_an_answer_with_the_state_of_another_setup_is_refused(
    stand_in: GitHubStandIn, tmp_path: Path
) -> None:
    """A code of someone else's App, sent with a state this setup did not issue, is never converted."""
    ours = await start_setup(stand_in, tmp_path / "ours.env")
    theirs = await start_setup(stand_in, tmp_path / "theirs.env")
    async with aiohttp.ClientSession() as http:
        our_action, _ = await read_form(http, ours.url)
        back = await submit(http, *await read_form(http, theirs.url))
        query = parse_qs(urlsplit(back).query)
        assert query["state"][0] != state_of(our_action)
        async with http.get(
            f"{ours.base}setup/callback?code={query['code'][0]}&state={query['state'][0]}"
        ) as refused:
            assert refused.status == 403
    assert stand_in.manifest_codes  # not converted
    assert "refused an answer" in await stop(ours)
    await stop(theirs)
    assert list(tmp_path.iterdir()) == []


async def test_a_code_already_converted_is_one_line_and_nothing_is_written(
    stand_in: GitHubStandIn, tmp_path: Path
) -> None:
    first = await start_setup(stand_in, tmp_path / "first.env")
    async with aiohttp.ClientSession() as http:
        back = await submit(http, *await read_form(http, first.url))
        async with http.get(back) as done:
            assert done.status == 200
        assert (await first.finish())[0] == 0
        code = parse_qs(urlsplit(back).query)["code"][0]

        second = await start_setup(stand_in, tmp_path / "second.env")
        action, _ = await read_form(http, second.url)
        state = parse_qs(urlsplit(action).query)["state"][0]
        async with http.get(f"{second.base}setup/callback?code={code}&state={state}") as failed:
            assert failed.status == 502
    status, _, errors = await second.finish()
    assert status == 1
    assert errors.splitlines() == [
        "kerrigan setup: GitHub refused the code (HTTP 404: Not Found): a code converts once, within an "
        "hour; nothing was written"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["first.env", "first.pem"]


def test_an_existing_settings_file_is_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "kerrigan.env"
    out.write_text("KERRIGAN_GITHUB_APP_ID=1\n")
    done = subprocess.run(
        [sys.executable, "-m", "kerrigan", "setup", "--public-url", PUBLIC_URL, "--no-browser"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == f"kerrigan setup: {out} exists: pass --force to replace it, or --out another file\n"
    assert out.read_text() == "KERRIGAN_GITHUB_APP_ID=1\n"


def test_a_taken_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "kerrigan", "setup", "--public-url", PUBLIC_URL, "--port", str(port)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.startswith(f"kerrigan setup: cannot listen on 127.0.0.1:{port}: ")
    assert len(done.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
