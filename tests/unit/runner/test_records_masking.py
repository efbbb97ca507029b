"""Output pages cut with a job's secrets masked: whatever the pieces the command wrote, and wherever the
pages fall, the pages add up to the whole output masked at once, characters whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.masking import Masker
from kerrigan.runner import records as records_module
from kerrigan.runner.records import JobRecord, JobRecords
from tests.unit.runner.test_records import job, pages

SECRET = "sëcret-välue-42"  # multi-byte characters inside the secret
MASKER = Masker.for_secrets({"TOKEN": SECRET})


def cut_in_pieces(work_dir: Path, data: bytes, cuts: list[int], page_bytes: int) -> str:
    """Write ``data`` in pieces at ``cuts``, cutting pages after each; the pages' text joined."""
    records = JobRecords(work_dir)
    record: JobRecord = job()
    records.save(record)
    records_module.PAGE_BYTES = page_bytes
    at = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        with records.output_path(record.id).open("ab") as output:
            output.write(data[at:cut])
        at = max(at, cut)
        records.cut_pages(record, final=False, masker=MASKER)
    records.cut_pages(record, final=True, masker=MASKER)
    return "".join(text for _, text in pages(records, record))


@pytest.fixture(autouse=True)
def page_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records_module, "PAGE_BYTES", records_module.PAGE_BYTES)  # restored after each


@settings(max_examples=60, deadline=None)
@given(
    before=st.text(alphabet="ab é\n€", max_size=30),
    after=st.text(alphabet="xy ü\n", max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=6),
    page_bytes=st.integers(min_value=4, max_value=64),
)
def test_pages_add_up_to_the_output_masked_at_once(
    tmp_path_factory: pytest.TempPathFactory, before: str, after: str, cuts: list[int], page_bytes: int
) -> None:
    data = f"{before}{SECRET}{after}{SECRET}{SECRET[:5]}".encode()
    text = cut_in_pieces(
        tmp_path_factory.mktemp("work"), data, [c for c in cuts if c < len(data)], page_bytes
    )
    assert text == MASKER.mask_all(data).decode()
    assert SECRET not in text
    assert "\ufffd" not in text  # no character was cut in two


def test_without_a_masker_pages_are_the_output_as_written(tmp_path: Path) -> None:
    records = JobRecords(tmp_path)
    record = job()
    records.save(record)
    with records.output_path(record.id).open("ab") as output:
        output.write(SECRET.encode())
    records.cut_pages(record, final=True)
    assert "".join(text for _, text in pages(records, record)) == SECRET


def test_a_kept_raw_log_is_rewritten_masked(tmp_path: Path) -> None:
    records = JobRecords(tmp_path)
    record = job()
    records.save(record)
    with records.output_path(record.id).open("ab") as output:
        output.write(f"one {SECRET} two\n".encode() * 10_000)
    records.mask_output(record, MASKER)
    kept = records.output_path(record.id).read_bytes()
    assert SECRET.encode() not in kept
    assert kept == b"one *** two\n" * 10_000
