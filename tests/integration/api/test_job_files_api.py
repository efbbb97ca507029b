"""``GET /api/v1/jobs/{id}`` lists the files the job uploaded (``artifacts.upload``), and
``GET /api/v1/jobs/{id}/files/{file}`` downloads one, as the session page's links do."""

from __future__ import annotations

import hashlib

from kerrigan.store.artifacts import append_chunk, begin_upload, finish_upload, not_kept
from kerrigan.testing.clock import FakeClock
from tests.integration.api.conftest import READER, Api
from tests.integration.api.history_rows import Run, add_session

SERIAL = b"U-Boot 2024.01\nlogin: \n" * 1000


async def _job_with_files(api: Api, clock: FakeClock) -> tuple[str, int]:
    async with api.db.sessions() as session, session.begin():
        session_id, [job] = await add_session(session, clock(), runs=[Run(host="lab-a-01")])
        kept = await begin_upload(session, str(job), "lab-a-01", "logs/serial.log", clock())
        await append_chunk(session, kept, 0, SERIAL[:10_000])
        await append_chunk(session, kept, 1, SERIAL[10_000:])
        await finish_upload(session, kept, len(SERIAL), hashlib.sha256(SERIAL).hexdigest())
        refused = await begin_upload(session, str(job), "lab-a-01", "huge.bin", clock())
        await not_kept(session, refused, 200 << 20, "not kept: 200 MiB, over the limit of 100 MiB a file")
    return session_id, job


async def test_a_job_lists_its_files_and_each_downloads_whole(api: Api, clock: FakeClock) -> None:
    session_id, job = await _job_with_files(api, clock)
    body = (await api.get(f"/jobs/{job}", who=READER)).body
    huge, serial = body["files"]  # by path
    assert (huge["path"], huge["size"], huge["url"]) == ("huge.bin", 200 << 20, None)
    assert huge["note"] == "not kept: 200 MiB, over the limit of 100 MiB a file"
    assert (serial["path"], serial["size"], serial["note"]) == ("logs/serial.log", len(SERIAL), None)
    assert serial["url"] == f"/api/v1/jobs/{job}/files/{serial['id']}"
    download = await api.call("GET", serial["url"].removeprefix("/api/v1"), who=READER)
    assert download.status == 200
    assert download.headers["Content-Type"] == "application/octet-stream"
    assert download.headers["Content-Disposition"] == "attachment; filename*=UTF-8''serial.log"
    assert download.body == SERIAL.decode()
    in_session = (await api.get(f"/sessions/{session_id}", who=READER)).body["jobs"][0]["files"]
    assert in_session == body["files"]


async def test_a_file_of_another_job_or_not_kept_is_a_404(api: Api, clock: FakeClock) -> None:
    _, job = await _job_with_files(api, clock)
    _, other = await _job_with_files(api, clock)
    files = (await api.get(f"/jobs/{job}")).body["files"]
    serial = files[1]["id"] if files[1]["url"] else files[0]["id"]
    huge = next(item["id"] for item in files if item["url"] is None)
    for path in (
        f"/jobs/{other}/files/{serial}",
        f"/jobs/{job}/files/{huge}",
        f"/jobs/{job}/files/x",
        "/jobs/999999/files/1",
    ):
        assert (await api.call("GET", path)).status == 404, path
