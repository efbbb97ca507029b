"""Label keys, values and tags: the rules of DESIGN.md's "Labels and inventory"."""

from __future__ import annotations

import re
import string
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.labels import (
    IMPLICIT_KEYS,
    REQUESTED_KEY_PATTERN,
    STORED_USER_KEY_PATTERN,
    USER_NAME_PATTERN,
    LabelError,
    is_reserved,
    is_valid_name,
    normalise_key,
    normalise_tag,
    slugify,
    validate_key,
    validate_requested_key,
    validate_tag,
    validate_user_key,
    validate_value,
)
from kerrigan.core.printable import is_printable

CHARSET = frozenset(string.ascii_lowercase + string.digits + "._-")

# Text that often lands inside the charset (so accepted keys are common) and sometimes far outside it.
key_like = st.text(alphabet=string.ascii_letters + string.digits + "._- /:", max_size=70) | st.text(
    max_size=70
)


def _accepted(validate: Callable[[str], str], text: str) -> bool:
    try:
        validate(text)
    except LabelError:
        return False
    return True


# -- keys ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["sdk", "form_factor", "firmware.channel", "owner_team", "a", "0", "2.2.0-som", "a" * 63]
)
def test_valid_key_is_returned_unchanged(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    ("key", "stored"),
    [("SDK", "sdk"), ("Form_Factor", "form_factor"), ("FIRMWARE.Channel", "firmware.channel")],
)
def test_key_is_stored_lowercase(key: str, stored: str) -> None:
    assert validate_key(key) == stored


def test_empty_key_is_refused() -> None:
    with pytest.raises(LabelError, match="label key must not be empty"):
        validate_key("")


def test_key_of_64_characters_is_refused_with_its_length() -> None:
    key = "k" * 64
    with pytest.raises(LabelError, match="is 64 characters long; the limit is 63") as caught:
        validate_key(key)
    assert repr(key) in str(caught.value)


@pytest.mark.parametrize(
    ("key", "character"),
    [
        ("form factor", " "),
        ("sdk/version", "/"),
        ("sdk:major", ":"),
        ("sdk=2", "="),
        ("a+b", "+"),
        ("\u00fcart", "\u00fc"),
        ("tab\tkey", "\t"),
    ],
)
def test_key_outside_the_charset_is_refused_naming_key_and_character(key: str, character: str) -> None:
    with pytest.raises(LabelError) as caught:
        validate_key(key)
    message = str(caught.value)
    assert repr(key) in message
    assert repr(character) in message


def test_user_key_is_stored_lowercase() -> None:
    assert validate_user_key("Owner_Team") == "owner_team"


@pytest.mark.parametrize(
    "key", ["kerrigan.pool_id", "kerrigan.board", "kerrigan.custom", "Kerrigan.Board", "KERRIGAN.X"]
)
def test_user_key_with_reserved_prefix_is_refused_naming_the_key(key: str) -> None:
    with pytest.raises(LabelError, match=re.escape("reserved prefix 'kerrigan.'")) as caught:
        validate_user_key(key)
    assert repr(key) in str(caught.value)


@pytest.mark.parametrize("key", ["kerrigan", "kerrigan_team", "kerriganx.y", "team.kerrigan.id"])
def test_user_key_that_only_resembles_the_reserved_prefix_is_accepted(key: str) -> None:
    assert validate_user_key(key) == key


def test_user_key_still_follows_the_charset() -> None:
    with pytest.raises(LabelError, match="contains ' '"):
        validate_user_key("owner team")


def test_there_are_nine_implicit_keys_all_reserved() -> None:
    assert set(IMPLICIT_KEYS) == {
        "kerrigan.pool_id",
        "kerrigan.pool_name",
        "kerrigan.firmware_channel",
        "kerrigan.firmware_base_version",
        "kerrigan.target_id",
        "kerrigan.board",
        "kerrigan.target_type",
        "kerrigan.os_type",
        "kerrigan.host",
    }
    assert len(IMPLICIT_KEYS) == 9


@pytest.mark.parametrize("key", IMPLICIT_KEYS)
def test_requested_key_may_be_an_implicit_key(key: str) -> None:
    assert validate_requested_key(key) == key


def test_requested_implicit_key_is_case_insensitive() -> None:
    assert validate_requested_key("Kerrigan.Pool_ID") == "kerrigan.pool_id"


@pytest.mark.parametrize("key", ["kerrigan.colour", "kerrigan.pool", "kerrigan.", "kerrigan.pool_id2"])
def test_requested_reserved_key_outside_the_nine_is_refused_naming_it(key: str) -> None:
    with pytest.raises(LabelError, match="is not a label Kerrigan generates") as caught:
        validate_requested_key(key)
    message = str(caught.value)
    assert repr(key) in message
    assert all(implicit in message for implicit in IMPLICIT_KEYS)


def test_requested_key_may_be_a_user_key() -> None:
    assert validate_requested_key("Form_Factor") == "form_factor"


def test_requested_key_still_follows_the_charset() -> None:
    with pytest.raises(LabelError, match="contains '/'"):
        validate_requested_key("kerrigan/pool_id")


@pytest.mark.parametrize(
    ("key", "reserved"),
    [
        ("kerrigan.pool_id", True),
        ("KERRIGAN.board", True),
        ("kerrigan.anything", True),
        ("kerrigan", False),
        ("sdk", False),
        ("team.kerrigan.x", False),
    ],
)
def test_is_reserved_looks_at_the_lowercase_prefix(key: str, reserved: bool) -> None:
    assert is_reserved(key) is reserved


# -- values ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["2.2.0", "1.10", "on", "SoM", "two words", "a=b", "\u00fcnic\u00f8de", "v" * 63]
)
def test_valid_value_is_returned_unchanged(value: str) -> None:
    assert validate_value(value, key="sdk") == value


def test_empty_value_is_refused_naming_the_key() -> None:
    with pytest.raises(LabelError, match="value of label 'sdk' must not be empty"):
        validate_value("", key="sdk")


def test_value_of_64_characters_is_refused_naming_the_key() -> None:
    with pytest.raises(LabelError, match="value of label 'sdk' is 64 characters long; the limit is 63"):
        validate_value("v" * 64, key="sdk")


@pytest.mark.parametrize("value", ["line\nbreak", "tab\there", "nul\x00", "del\x7f", "zero\u200bwidth"])
def test_non_printable_value_is_refused_naming_key_and_value(value: str) -> None:
    with pytest.raises(LabelError, match="contains a non-printable character") as caught:
        validate_value(value, key="uart")
    message = str(caught.value)
    assert "'uart'" in message
    assert repr(value) in message


def test_value_error_without_a_key_does_not_mention_a_label() -> None:
    with pytest.raises(LabelError) as caught:
        validate_value("")
    assert str(caught.value) == "value must not be empty"


# -- tags ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["2.2.0-som-devkits", "ga-firmware", "uart-debug", "uart_debug", "t" * 63])
def test_valid_tag_is_returned_unchanged(tag: str) -> None:
    assert validate_tag(tag) == tag


def test_tag_is_stored_lowercase() -> None:
    assert validate_tag("UART-Debug") == "uart-debug"


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("", "tag must not be empty"),
        ("t" * 64, "is 64 characters long"),
        ("uart debug", "contains ' '"),
        ("uart/debug", "contains '/'"),
    ],
)
def test_invalid_tag_is_refused(tag: str, message: str) -> None:
    with pytest.raises(LabelError, match=message):
        validate_tag(tag)


@pytest.mark.parametrize(
    "tag", ["kerrigan.x", "kerrigan.pool_id", "Kerrigan.Board", "KERRIGAN.X", "kerrigan."]
)
def test_tag_with_reserved_prefix_is_refused_like_a_label_key(tag: str) -> None:
    with pytest.raises(LabelError, match=re.escape("reserved prefix 'kerrigan.'")) as caught:
        validate_tag(tag)
    assert repr(tag) in str(caught.value)
    assert caught.value.subject == "tag"


@pytest.mark.parametrize("tag", ["kerrigan", "kerrigan_team", "kerriganx.y", "team.kerrigan.id"])
def test_tag_that_only_resembles_the_reserved_prefix_is_accepted(tag: str) -> None:
    assert validate_tag(tag) == tag


def test_tag_error_names_the_tag() -> None:
    with pytest.raises(LabelError) as caught:
        validate_tag("UART Debug")
    assert str(caught.value).startswith("tag 'UART Debug' ")


# -- names and slugs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("sdk", True),
        ("modalix-bluebox", True),
        ("SDK", False),
        ("", False),
        ("n" * 64, False),
        ("a b", False),
    ],
)
def test_is_valid_name_accepts_only_normalised_names(name: str, valid: bool) -> None:
    assert is_valid_name(name) is valid


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("SDK 2.2 SoM", "sdk-2-2-som"),
        ("Default", "default"),
        ("  Lab A / Bench 3  ", "lab-a-bench-3"),
        ("already-a-slug", "already-a-slug"),
        ("snake_case.name", "snake-case-name"),
        ("Caf\u00e9 Lab", "caf-lab"),
        ("---", ""),
        ("", ""),
    ],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_slugify_cuts_long_names_to_63_characters() -> None:
    assert slugify("a" * 70) == "a" * 63


def test_slugify_does_not_leave_a_dash_where_it_cuts() -> None:
    slug = slugify("ab " * 30)
    assert len(slug) <= 63
    assert not slug.endswith("-")


# -- properties of normalisation -------------------------------------------------------------------


@settings(max_examples=200)
@given(key_like)
def test_normalising_a_key_is_idempotent(key: str) -> None:
    assert normalise_key(normalise_key(key)) == normalise_key(key)


@settings(max_examples=200)
@given(key_like)
def test_normalising_a_tag_is_idempotent(tag: str) -> None:
    assert normalise_tag(normalise_tag(tag)) == normalise_tag(tag)


@settings(max_examples=200)
@given(key_like)
def test_validating_an_accepted_key_again_returns_the_same_key(key: str) -> None:
    try:
        once = validate_key(key)
    except LabelError:
        return
    assert validate_key(once) == once


@settings(max_examples=200)
@given(key_like)
def test_key_is_accepted_iff_its_lowercase_form_is(key: str) -> None:
    assert _accepted(validate_key, key) == _accepted(validate_key, key.lower())


@settings(max_examples=200)
@given(key_like)
def test_tag_is_accepted_iff_its_lowercase_form_is(tag: str) -> None:
    assert _accepted(validate_tag, tag) == _accepted(validate_tag, tag.lower())


@settings(max_examples=200)
@given(key_like)
def test_accepted_key_is_lowercase_and_within_the_charset(key: str) -> None:
    try:
        stored = validate_key(key)
    except LabelError:
        return
    assert stored == stored.lower()
    assert 1 <= len(stored) <= 63
    assert set(stored) <= CHARSET


@settings(max_examples=200)
@given(st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=63))
def test_keys_differing_only_in_case_are_the_same_key(key: str) -> None:
    assert validate_key(key.upper()) == validate_key(key.lower()) == key.lower()


@settings(max_examples=200)
@given(st.text(max_size=70))
def test_value_is_accepted_iff_it_is_1_to_63_printable_characters(value: str) -> None:
    expected = 1 <= len(value) <= 63 and is_printable(value)
    assert _accepted(validate_value, value) == expected


@settings(max_examples=200)
@given(st.text(max_size=100))
def test_slug_is_empty_or_a_valid_name(text: str) -> None:
    slug = slugify(text)
    assert slug == "" or is_valid_name(slug)


# The patterns the API's document states: what they allow, the validators take.
@settings(max_examples=200)
@given(st.from_regex(f"(?:{USER_NAME_PATTERN})", fullmatch=True))
def test_a_name_the_user_pattern_allows_is_a_valid_key_and_tag(name: str) -> None:
    assert validate_user_key(name) == validate_tag(name) == name.lower()


@settings(max_examples=200)
@given(st.from_regex(f"(?:{STORED_USER_KEY_PATTERN})", fullmatch=True))
def test_a_key_the_stored_pattern_allows_is_stored_as_written(key: str) -> None:
    assert validate_user_key(key) == key


@settings(max_examples=200)
@given(st.from_regex(f"(?:{REQUESTED_KEY_PATTERN})", fullmatch=True))
def test_a_key_the_requested_pattern_allows_may_be_asked_for(key: str) -> None:
    assert validate_requested_key(key) == key


@pytest.mark.parametrize("name", ["kerrigan.board", "KERRIGAN.x", "Kerrigan.pool_id"])
def test_the_user_pattern_refuses_the_reserved_namespace_in_any_case(name: str) -> None:
    assert re.fullmatch(USER_NAME_PATTERN, name) is None
