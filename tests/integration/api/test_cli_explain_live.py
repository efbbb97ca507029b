"""``kerrigan explain MANIFEST`` against a live lab: with ``--url``/``KERRIGAN_URL`` and a token it asks the
lab's API (``POST /api/v1/explain``), no database URL needed. The lab is the API tests' (``conftest.py``):
pool-a (``sdk=2.2.0`` over its devices, dev-a1 overriding ``sdk=2.2.1``), pool-b (``sdk=2.1.1``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.api.conftest import READER, Api
from tests.integration.test_cli_explain import ROOT

MANIFEST = """\
name: live
on: [push]
tasks:
  - id: old-sdk
    run: ./smoke.sh
    requirements: {labels: {sdk: "2.1.1"}}
  - id: no-such
    run: ./smoke.sh
    requirements: {labels: {sdk: "9.9.9"}}
"""


async def kerrigan(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KERRIGAN_")} | env
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "kerrigan.cli", "explain", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
        env=environment,
    )


def _lab(api: Api) -> dict[str, str]:
    return {
        "KERRIGAN_URL": str(api.client.server.make_url("/")).rstrip("/"),
        "KERRIGAN_TOKEN": api.tokens[READER],
    }


async def test_explain_asks_the_live_lab_and_exits_as_it_would(api: Api, tmp_path: Path) -> None:
    manifest = tmp_path / "live.yml"
    manifest.write_text(MANIFEST)
    done = await kerrigan(str(manifest), env=_lab(api))
    assert done.returncode == 1, done.stderr
    assert "workflow live" in done.stdout
    assert "dev-b1" in done.stdout
    assert "sdk expected 9.9.9" in done.stdout
    as_json = await kerrigan(str(manifest), "--format", "json", env=_lab(api))
    assert as_json.returncode == 1, as_json.stderr
    document = json.loads(as_json.stdout)
    assert [task["id"] for task in document["tasks"]] == ["old-sdk", "no-such"]
    assert document["tasks"][0]["eligible_devices"] == ["dev-b1"]
    assert "exit_code" not in document


async def test_an_unsigned_or_refused_call_is_one_line_and_exit_2(api: Api, tmp_path: Path) -> None:
    manifest = tmp_path / "live.yml"
    manifest.write_text(MANIFEST)
    done = await kerrigan(str(manifest), "--url", _lab(api)["KERRIGAN_URL"], env={})
    assert done.returncode == 2
    assert done.stderr.startswith("kerrigan explain: ")
    assert "(HTTP 401)" in done.stderr
    assert "Traceback" not in done.stderr


async def test_the_api_answers_text_with_the_exit_code_in_a_header(api: Api) -> None:
    reply = await api.call("POST", "/explain?format=text", json={"manifest": MANIFEST}, who=READER)
    assert reply.status == 200
    assert reply.headers["Kerrigan-Exit-Code"] == "1"
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert "workflow live" in reply.body
    bad = await api.call("POST", "/explain?format=yaml", json={"manifest": MANIFEST}, who=READER)
    assert (bad.status, bad.body["error"]["field"]) == (400, "format")
