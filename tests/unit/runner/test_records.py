"""The agent's job records and output pages on real files (seed 003's "Retention" rules)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from kerrigan.core.accounting import health_report, reservation_use
from kerrigan.runner import records as records_module
from kerrigan.runner.records import JobRecord, JobRecords

HOUR = 60 * 60
DAY = 24 * HOUR
ACCEPTED = 1_000_000.0


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def records(work_dir: Path) -> JobRecords:
    return JobRecords(work_dir)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pages of 8 bytes, so a few bytes of output make several pages."""
    monkeypatch.setattr(records_module, "PAGE_BYTES", 8)
    return 8


def job(job_id: str = "1", **fields: object) -> JobRecord:
    offer = {"id": int(job_id), "repository": "octo/firmware", "task": "build", "claim": {"vcpus": 4}}
    return JobRecord(job_id, offer, accepted_at=ACCEPTED, **fields)  # type: ignore[arg-type]


def write_output(records: JobRecords, record: JobRecord, data: bytes) -> None:
    records.save(record)
    with records.output_path(record.id).open("ab") as output:
        output.write(data)


def pages(records: JobRecords, record: JobRecord) -> list[tuple[int, str]]:
    found = [records.page(record, seq) for seq in range(record.first_kept, record.next_page)]
    assert None not in found
    return [page for page in found if page is not None]


def ended(record: JobRecord, at: float, *, reported: bool) -> JobRecord:
    record.state, record.ended_at, record.exit_status, record.reported = "ended", at, 0, reported
    return record


# -- records -----------------------------------------------------------------------------------------


def test_saved_records_load_back_whole_after_a_restart(records: JobRecords, work_dir: Path) -> None:
    record = job(
        "12",
        state="running",
        ready_at=ACCEPTED + 5,
        started_at=ACCEPTED + 6,
        workspace="octo-firmware",
        cpus=[1, 6],
        pid=4242,
        cut_bytes=100,
        next_page=2,
        next_offset=100,
        uploaded=1,
    )
    records.save(record)
    assert JobRecords(work_dir).load_all() == [record]


def test_saving_again_replaces_the_record_whole(records: JobRecords, work_dir: Path) -> None:
    record = job("3")
    records.save(record)
    record.state, record.cpus = "running", [2, 7]
    records.save(record)
    assert JobRecords(work_dir).load_all() == [record]
    assert sorted(path.name for path in records.folder("3").iterdir()) == ["pages", "record.json"]


def test_records_load_in_job_id_order(records: JobRecords) -> None:
    for job_id in ("100", "9", "10"):
        records.save(job(job_id))
    assert [record.id for record in records.load_all()] == ["9", "10", "100"]


def test_an_unreadable_record_is_logged_and_left_alone(
    records: JobRecords, caplog: pytest.LogCaptureFixture
) -> None:
    records.save(job("1"))
    records.save(job("2"))
    records.save(job("3"))
    (records.folder("2") / "record.json").write_text("{not json", encoding="utf-8")
    unknown = json.loads((records.folder("3") / "record.json").read_text(encoding="utf-8"))
    (records.folder("3") / "record.json").write_text(json.dumps({**unknown, "from_the_future": 1}))
    with caplog.at_level(logging.WARNING, logger=records_module.__name__):
        loaded = records.load_all()
    assert [record.id for record in loaded] == ["1"]
    assert len(caplog.records) == 2
    assert (records.folder("2") / "record.json").exists()  # left for an operator to look at


@pytest.mark.parametrize("job_id", ["", "../1", "1/2", "-1", "1 "])
def test_a_job_folder_is_named_by_a_numeric_id_only(records: JobRecords, job_id: str) -> None:
    with pytest.raises(ValueError, match="not a job id"):
        records.folder(job_id)


# -- output pages ------------------------------------------------------------------------------------


def test_output_is_cut_into_numbered_pages_of_page_bytes(records: JobRecords, small_pages: int) -> None:
    record = job()
    write_output(records, record, b"0123456789abcdefghij")
    assert records.cut_pages(record) is True
    assert pages(records, record) == [(0, "01234567"), (8, "89abcdef"), (16, "ghij")]
    assert (record.next_page, record.next_offset, record.cut_bytes) == (3, 20, 20)
    assert records.cut_pages(record) is False  # nothing new
    assert records.page(record, 3) is None  # never cut


def test_each_cut_continues_where_the_last_one_stopped(records: JobRecords, small_pages: int) -> None:
    record = job()
    write_output(records, record, b"first ")
    records.cut_pages(record)
    write_output(records, record, b"second")
    records.cut_pages(record, final=True)
    assert pages(records, record) == [(0, "first "), (6, "second")]


def test_cuts_never_split_a_utf8_character(records: JobRecords, small_pages: int) -> None:
    text = "aé€😀 — naïve façade 日本語 ✓"
    record = job()
    write_output(records, record, text.encode())
    records.cut_pages(record, final=True)
    found = pages(records, record)
    assert "".join(page for _, page in found) == text
    assert "\ufffd" not in "".join(page for _, page in found)
    # Each page's offset is where it starts in the UTF-8 text sent.
    offsets = [offset for offset, _ in found]
    assert offsets == [sum(len(page.encode()) for _, page in found[:index]) for index in range(len(found))]
    assert record.next_offset == len(text.encode())


def test_a_character_split_between_two_cuts_arrives_whole(records: JobRecords, small_pages: int) -> None:
    encoded = "ab€".encode()
    record = job()
    write_output(records, record, encoded[:3])  # "ab" and the first byte of the euro sign
    records.cut_pages(record)
    assert pages(records, record) == [(0, "ab")]
    write_output(records, record, encoded[3:])
    records.cut_pages(record, final=True)
    assert pages(records, record) == [(0, "ab"), (2, "€")]


def test_invalid_utf8_output_becomes_replacement_characters(records: JobRecords) -> None:
    record = job()
    write_output(records, record, b"ok \xff\xfe end \xe2\x82")  # ends in an incomplete character
    records.cut_pages(record, final=True)
    assert pages(records, record) == [(0, "ok \ufffd\ufffd end \ufffd")]


def test_page_text_is_the_output_byte_for_byte_including_carriage_returns(records: JobRecords) -> None:
    output = "progress 10%\rprogress 100%\r\nwindows line\r\n"
    record = job()
    write_output(records, record, output.encode())
    records.cut_pages(record, final=True)
    offset, text = pages(records, record)[0]
    assert (offset, text) == (0, output)
    assert offset + len(text.encode()) == record.next_offset


def test_the_final_cut_takes_all_the_remaining_output(records: JobRecords, small_pages: int) -> None:
    output = bytes(range(33, 33 + 90)) * 2  # 180 bytes: more than 16 pages of 8
    record = job()
    write_output(records, record, output)
    records.cut_pages(record, final=True)
    assert record.cut_bytes == len(output)
    assert "".join(page for _, page in pages(records, record)).encode() == output


def test_a_character_split_across_an_agent_restart_arrives_whole(
    records: JobRecords, work_dir: Path, small_pages: int
) -> None:
    encoded = "ab€".encode()
    record = job()
    write_output(records, record, encoded[:3])
    records.cut_pages(record)
    records.save(record)
    [restarted_record] = (restarted := JobRecords(work_dir)).load_all()
    write_output(restarted, restarted_record, encoded[3:])
    restarted.cut_pages(restarted_record, final=True)
    assert "".join(page for _, page in pages(restarted, restarted_record)) == "ab€"


def test_old_pages_are_evicted_beyond_max_retained_bytes(
    records: JobRecords, small_pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records_module, "MAX_RETAINED_BYTES", 20)
    record = job()
    write_output(records, record, b"".join(f"page{seq:03d}!".encode() for seq in range(6)))
    records.cut_pages(record)
    # 48 bytes in six pages: only the newest two (16 bytes) fit under 20.
    assert record.first_kept == 4
    assert [records.page(record, seq) for seq in range(4)] == [None] * 4
    assert pages(records, record) == [(32, "page004!"), (40, "page005!")]
    assert sorted(path.name for path in (records.folder("1") / "pages").iterdir()) == [
        "4.json",
        "4.log",
        "5.json",
        "5.log",
    ]


def test_eviction_keeps_the_newest_page_even_when_it_alone_is_too_big(
    records: JobRecords, small_pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records_module, "MAX_RETAINED_BYTES", 3)
    record = job()
    write_output(records, record, b"aaaaaaaabbbbbbbbcccc")
    records.cut_pages(record)
    assert record.first_kept == 2
    assert pages(records, record) == [(16, "cccc")]


def test_eviction_runs_again_as_more_output_is_cut(
    records: JobRecords, small_pages: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records_module, "MAX_RETAINED_BYTES", 16)
    record = job()
    write_output(records, record, b"aaaaaaaabbbbbbbb")
    records.cut_pages(record)
    assert record.first_kept == 0
    write_output(records, record, b"cccccccc")
    records.cut_pages(record)
    assert record.first_kept == 1
    assert pages(records, record) == [(8, "bbbbbbbb"), (16, "cccccccc")]


def test_cutting_stops_with_the_page_that_passes_the_cap_whatever_the_logs_size(
    work_dir: Path, small_pages: int
) -> None:
    # A log of 1 MiB of holes (a job's stdout stretched by ftruncate, under an older launcher): no more of
    # it is read than the cap and one page, however often or finally it is cut.
    records = JobRecords(work_dir, output_max_bytes=20)
    record = job()
    write_output(records, record, b"the job's own\n")
    with records.output_path(record.id).open("r+b") as output:
        output.truncate(1 << 20)
    records.cut_pages(record)
    records.cut_pages(record, final=True)
    # Three pages of 8 bytes of the log (its NULs shown as U+FFFD, 3 bytes each): the third passes 20.
    assert (record.cut_bytes, record.next_page, record.next_offset) == (24, 3, 44)
    assert "".join(text for _, text in pages(records, record)).startswith("the job's own\n")


def test_drop_output_removes_the_raw_log_and_keeps_the_pages(records: JobRecords) -> None:
    record = job()
    write_output(records, record, b"all done\n")
    records.cut_pages(record, final=True)
    records.drop_output(record)
    assert not records.output_path("1").exists()
    assert pages(records, record) == [(0, "all done\n")]
    records.drop_output(record)  # again: nothing left to drop, no error
    assert records.cut_pages(record) is False


# -- retention ---------------------------------------------------------------------------------------


def test_expired_history_never_becomes_before_start_refusal(records: JobRecords, work_dir: Path) -> None:
    end = ACCEPTED + HOUR
    jobs = {
        "1": ended(job("1"), end, reported=True),
        "2": ended(job("2"), end, reported=False),  # the server has not acknowledged the end yet
        "3": job("3", state="running", started_at=ACCEPTED + 1),  # never ended: never expires
        "4": job("4", state="waiting", ready_at=ACCEPTED + 1),
        "5": ended(job("5"), end + 1, reported=True),  # ended a second later: not yet 24 hours
    }
    for record in jobs.values():
        write_output(records, record, b"output\n")
        records.cut_pages(record, final=True)
        records.save(record)

    assert records.expire(jobs, end + DAY - 1) == []
    assert records.expire(jobs, end + DAY) == ["1"]
    assert sorted(jobs) == ["2", "3", "4", "5"]
    assert not records.folder("1").exists()
    # What is kept is kept as it was: its state is not rewritten into anything else.
    kept = {record.id: record for record in JobRecords(work_dir).load_all()}
    assert sorted(kept) == ["2", "3", "4", "5"]
    assert (kept["3"].state, kept["4"].state, kept["2"].state) == ("running", "waiting", "ended")
    assert records.page(kept["2"], 0) == (0, "output\n")

    assert records.expire(jobs, end + 10 * DAY) == ["5"]  # the running and unreported ones stay
    jobs["2"].reported = True
    assert records.expire(jobs, end + 10 * DAY) == ["2"]
    assert sorted(jobs) == ["3", "4"]


# -- what the health report counts --------------------------------------------------------------------


def test_a_record_counts_for_health_only_once_ended() -> None:
    assert job("1", state="running").finished() is None


def test_an_ended_record_without_accounting_reports_it_absent_not_zero() -> None:
    summary = ended(job("1"), ACCEPTED + 60, reported=True).finished()
    assert summary is not None
    assert (summary.wall_s, summary.average_use_ppm) == (None, None)
    assert (summary.repository, summary.task_id, summary.vcpus) == ("octo/firmware", "build", 4)


def test_an_unsized_offer_claims_two() -> None:
    assert JobRecord("1", {"repository": "octo/firmware"}).claim == 2


def test_a_withdrawn_job_counts_as_a_queue_wait_refusal() -> None:
    record = ended(job("1"), ACCEPTED + 300, reported=True)
    record.outcome = "withdrawn"
    summary = record.finished()
    assert summary is not None
    assert summary.reason == "queue_wait_exceeded"


def test_long_eight_vcpu_job_record_survives_a_restart_into_the_health_report(
    records: JobRecords, work_dir: Path
) -> None:
    record = ended(job("8"), ACCEPTED + HOUR, reported=True)
    record.offer["claim"] = {"vcpus": 8}
    record.accounting = {"reservation_use": reservation_use(cpu_s=0.5 * HOUR, wall_s=HOUR, vcpus=8)}
    records.save(record)
    [loaded] = JobRecords(work_dir).load_all()
    summary = loaded.finished()
    assert summary is not None
    report = health_report([summary], ACCEPTED + HOUR + 60)
    assert [
        (row["job"], row["vcpus"], row["average_use_ppm"]) for row in report["underused_reservations"]
    ] == [("8", 8, 62_500)]
