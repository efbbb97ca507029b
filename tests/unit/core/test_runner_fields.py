"""The runner protocol's field ranges and the output cut, alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kerrigan.core import runner_fields as fields
from kerrigan.core.runner_fields import FieldError


def refused(check: Any, *args: Any) -> FieldError:
    with pytest.raises(FieldError) as caught:
        check(*args)
    return caught.value


@pytest.mark.parametrize("text", ["²", "0", "-1", "1.0", "", "2147483648", "9" * 5000, "١٢"])
def test_a_job_id_is_ascii_digits_within_the_databases_integer(text: str) -> None:
    assert refused(fields.job_id, text).field == "job_id"


def test_a_job_id_in_range_is_its_number() -> None:
    assert (fields.job_id("1"), fields.job_id("2147483647")) == (1, 2**31 - 1)


@pytest.mark.parametrize("status", [-64, -9, -1, 0, 1, 75, 255])
def test_exit_statuses_as_the_agent_reports_them_are_accepted(status: int) -> None:
    assert fields.exit_status(status) == status


@pytest.mark.parametrize("status", [2**70, 256, -65, True, 1.0, "0", None])
def test_an_exit_status_out_of_range_names_the_field(status: Any) -> None:
    error = refused(fields.exit_status, status)
    assert error.field == "exit_status"
    assert "-64 to 255" in error.message


@pytest.mark.parametrize("seq", [2**70, 2**31 - 1, -1, False])
def test_a_chunk_number_is_32_bit_with_room_for_the_next(seq: Any) -> None:
    assert refused(fields.sequence, seq, "seq").field == "seq"


def test_the_last_chunk_number_leaves_room_for_the_next() -> None:
    assert fields.sequence(2**31 - 2) + 1 == fields.MAX_ID


def test_a_lone_surrogate_anywhere_is_refused_with_its_field() -> None:
    body = json.loads('{"seq": 0, "data": "ok \\ud800"}')
    assert refused(fields.check_document, body).field == "data"
    nested = json.loads('{"health": {"repositories": [{"name": "\\udfff"}]}}')
    assert refused(fields.check_document, nested).field == "health.repositories[0].name"
    key = json.loads('{"devices": {"\\ud800": "present"}}')
    assert refused(fields.check_document, key).field == "devices"


def test_non_finite_numbers_and_deep_nesting_are_refused() -> None:
    assert refused(fields.check_document, json.loads('{"accounting": {"cpu_s": NaN}}')).field == (
        "accounting.cpu_s"
    )
    deep: Any = 1
    for _ in range(40):
        deep = {"x": deep}
    assert "nested more than 16 deep" in refused(fields.check_document, {"health": deep}).message


def test_valid_text_passes_whole() -> None:
    fields.check_document({"data": "naïve ✓ 😀\n", "n": [1, 2.5, {"k": None}]})
    assert fields.chunk_data("naïve ✓ 😀\n") == "naïve ✓ 😀\n"


@pytest.mark.parametrize(
    "data",
    ["\ud800", "a\x00b", "x" * (fields.MAX_CHUNK_BYTES + 1), "✓" * (fields.MAX_CHUNK_BYTES // 3 + 1), 5],
)
def test_chunk_text_must_be_utf8_without_nul_and_bounded(data: Any) -> None:
    assert refused(fields.chunk_data, data).field == "data"


def test_the_agents_largest_page_fits_a_chunk_and_a_call() -> None:
    # 64 KiB of bytes that are not UTF-8 become U+FFFD each: the worst page the agent sends.
    page = "\ufffd" * 64 * 1024
    assert fields.chunk_data(page) == page
    body = json.dumps({"seq": 0, "offset": 0, "data": page}).encode()  # as aiohttp sends it
    assert len(body) < fields.MAX_BODY_BYTES


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"reservation_use": {"cpu_s": -1.0}}, "accounting.reservation_use.cpu_s"),
        ({"reservation_use": {"wall_s": 2.0**60}}, "accounting.reservation_use.wall_s"),
        ({"reservation_use": {"vcpus": 2**70}}, "accounting.reservation_use.vcpus"),
        ({"many": list(range(300))}, "accounting.many"),
    ],
)
def test_accounting_figures_are_finite_and_non_negative(value: Any, field: str) -> None:
    assert refused(fields.figures, value, "accounting").field == field


def test_accounting_as_the_agent_reports_it_passes() -> None:
    fields.figures(
        {"reservation_use": {"cpu_s": 93.75, "wall_s": 75.0, "vcpus": 2, "average_use_ppm": 625_000}},
        "accounting",
    )


def test_an_object_is_bounded_in_entries_and_name_length() -> None:
    assert refused(fields.sized, {str(n): 1 for n in range(5000)}, "devices").field == "devices"
    assert refused(fields.sized, {"d" * 300: "present"}, "devices").field == "devices"
    fields.sized({"modalix-bluebox": "present"}, "devices")


@pytest.mark.parametrize(
    ("count", "text"),
    [(64 * 1024 * 1024, "64 MiB"), (1536, "1.5 KiB"), (900, "900 bytes"), (3 * 1024**3, "3 GiB")],
)
def test_sizes_read_as_people_write_them(count: int, text: str) -> None:
    assert fields.size_text(count) == text


def test_the_cut_notice_names_the_limit_and_the_setting() -> None:
    assert fields.cut_notice(64 * 1024 * 1024) == "[output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n"


@pytest.mark.parametrize(
    ("data", "room", "kept"),
    [("abcdef", 4, "abcd"), ("ab✓cd", 3, "ab"), ("ab✓cd", 5, "ab✓"), ("abc", 10, "abc"), ("abc", 0, "")],
)
def test_the_part_that_fits_is_cut_between_characters(data: str, room: int, kept: str) -> None:
    assert fields.fitting(data, room) == kept


def test_settings_as_a_host_reports_them_pass_as_a_dict_of_their_own() -> None:
    sent = {
        "POWER_OUTLET": "pdu-3:7",
        "_x1": "",
        "Lab_Serial": "naïve ✓ 😀",
        "N" * 255: "v" * fields.MAX_TEXT,
    }
    found = fields.settings(sent)
    assert found == sent
    assert type(found) is dict
    found["POWER_OUTLET"] = "changed"
    assert sent["POWER_OUTLET"] == "pdu-3:7"
    assert fields.settings({}) == {}


def test_as_many_settings_as_allowed_pass_and_one_more_is_refused() -> None:
    most = {f"S{n}": "x" for n in range(fields.MAX_SETTINGS)}
    assert fields.settings(most) == most
    error = refused(fields.settings, {**most, "ONE_MORE": "x"})
    assert (error.field, error.message) == (
        "settings",
        f"settings holds at most {fields.MAX_SETTINGS} entries",
    )


@pytest.mark.parametrize("value", [["POWER_OUTLET"], "POWER_OUTLET=pdu-3:7", None, 7, [("A", "1")]])
def test_settings_must_be_a_mapping(value: Any) -> None:
    error = refused(fields.settings, value)
    assert (error.field, error.message) == (
        "settings",
        "settings must map environment variable names to text",
    )


@pytest.mark.parametrize("name", ["1WIRE", "POWER-OUTLET", "A=B", "A B", "A\n", "É", "\ud800", "a.b"])
def test_a_setting_name_must_be_an_environment_variable_name(name: str) -> None:
    error = refused(fields.settings, {"OK": "x", name: "x"})
    assert error.field == "settings"
    assert error.message == f"settings: {name!r} is not an environment variable name"


@pytest.mark.parametrize("name", ["", "N" * 256, 7, None])
def test_a_setting_name_is_1_to_255_characters_of_text(name: Any) -> None:
    error = refused(fields.settings, {name: "x"})
    assert (error.field, error.message) == ("settings", "a name in settings must be 1 to 255 characters")


def test_a_long_bad_setting_name_is_cut_in_the_message() -> None:
    error = refused(fields.settings, {"-" * 200: "x"})
    assert error.message == f"settings: {'-' * 40!r} is not an environment variable name"


@pytest.mark.parametrize("value", [1, None, True, ["x"], {"x": "y"}, "x" * (fields.MAX_TEXT + 1)])
def test_a_setting_value_is_text_of_at_most_max_text_characters(value: Any) -> None:
    error = refused(fields.settings, {"POWER_OUTLET": "pdu-3:7", "LAB_TOKEN": value})
    assert error.field == "settings.LAB_TOKEN"
    assert error.message == f"settings.LAB_TOKEN must be text of at most {fields.MAX_TEXT} characters"


def test_a_setting_value_with_a_lone_surrogate_is_refused() -> None:
    sent = json.loads('{"POWER_OUTLET": "pdu \\ud800"}')
    error = refused(fields.settings, sent)
    assert error.field == "settings.POWER_OUTLET"
    assert error.message == "settings.POWER_OUTLET is not valid UTF-8 text (it holds a lone surrogate)"
    assert refused(fields.settings, {"A": "\udfff"}).field == "settings.A"


def test_a_bad_setting_names_the_field_given() -> None:
    where = "devices.modalix-bluebox.settings"
    assert refused(fields.settings, ["x"], where).field == where
    error = refused(fields.settings, {"1A": "x"}, where)
    assert (error.field, error.message) == (where, f"{where}: '1A' is not an environment variable name")
    assert refused(fields.settings, {"": "x"}, where).field == where
    error = refused(fields.settings, {"LAB_TOKEN": 5}, where)
    assert (error.field, error.message) == (
        f"{where}.LAB_TOKEN",
        f"{where}.LAB_TOKEN must be text of at most {fields.MAX_TEXT} characters",
    )


def test_a_setting_value_with_a_nul_is_refused_as_no_environment_could_hold_it() -> None:
    error = refused(fields.settings, {"POWER_OUTLET": "pdu-3\x007"})
    assert (error.field, error.message) == (
        "settings.POWER_OUTLET",
        "settings.POWER_OUTLET must not hold a NUL character",
    )
