"""Masking a job's secrets in its output: every exact occurrence, overlapping or split across chunks."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kerrigan.core.masking import (
    MASK,
    MIN_SECRET_BYTES,
    Masker,
    OutputMasker,
    SecretRefusedError,
    patterns_of,
    secret_problem,
)

TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDc2kVBMzQ2O3FVZGdYdnpNR0hnbGRsZ1E4N0FhVGJQb3pLdnRwQ3hrAAAA\n"
    "lw==\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def masker(*values: str) -> Masker:
    return Masker.for_secrets({f"S{index}": value for index, value in enumerate(values)})


def streamed(masking: Masker, data: bytes, sizes: list[int]) -> bytes:
    """``data`` fed in chunks of ``sizes`` (cycled), then flushed."""
    stream, out, at, turn = OutputMasker(masking), [], 0, 0
    while at < len(data):
        size = sizes[turn % len(sizes)]
        out.append(stream.feed(data[at : at + size]))
        at, turn = at + size, turn + 1
    return b"".join(out) + stream.flush()


def brute_force(patterns: frozenset[bytes], data: bytes, mask: bytes = MASK) -> bytes:
    """The rule, the slow and obvious way: every occurrence found by trying every position, overlapping
    ones merged, each run replaced by one mask."""
    spans = sorted(
        (start, start + len(pattern))
        for pattern in patterns
        for start in range(len(data))
        if data.startswith(pattern, start)
    )
    out, text_from, run_end = [], 0, -1
    for start, end in spans:
        if start >= run_end:
            out += [data[text_from:start], mask]
        run_end = max(run_end, end)
        text_from = run_end
    return b"".join([*out, data[text_from:]])


# -- the rule ----------------------------------------------------------------------------------------


def test_every_occurrence_is_masked_and_the_text_around_it_kept() -> None:
    data = f"token={TOKEN}\nagain {TOKEN}.".encode()
    assert masker(TOKEN).mask_all(data) == b"token=***\nagain ***."


@pytest.mark.parametrize(
    ("values", "text", "expected"),
    [
        # one secret the prefix of another: the longer's mask holds it
        (["abcdefgh", "abcdefghijkl"], "<abcdefghijkl>", "<***>"),
        # one inside another
        (["cdefghij", "abcdefghijkl"], "<abcdefghijkl>", "<***>"),
        # partly overlapping: one mask for both, not the first's mask and the second's tail
        (["abcdefgh", "fghijklmnop"], "<abcdefghijklmnop>", "<***>"),
        # a secret overlapping itself
        (["abababab"], "<ababababab>", "<***>"),
        # repeats that only touch: a mask each
        (["abcdefgh"], "<abcdefghabcdefgh>", "<******>"),
        (["abcdefgh"], "<abcdefgh abcdefgh>", "<*** ***>"),
    ],
)
def test_overlapping_occurrences_make_one_mask_touching_ones_a_mask_each(
    values: list[str], text: str, expected: str
) -> None:
    assert masker(*values).mask_all(text.encode()) == expected.encode()


def test_bytes_that_are_not_utf8_pass_through_and_secrets_beside_them_are_masked() -> None:
    data = b"\xff\xfe\x00" + TOKEN.encode() + b"\xc3\x28\x80"
    assert masker(TOKEN).mask_all(data) == b"\xff\xfe\x00***\xc3\x28\x80"


def test_a_secret_outside_ascii_is_masked_by_its_utf8_bytes() -> None:
    assert masker("pässwörd-ü").mask_all("[pässwörd-ü]".encode()) == b"[***]"


def test_without_secrets_output_passes_through_and_nothing_is_held() -> None:
    stream = OutputMasker(Masker.for_secrets({}))
    assert stream.feed(b"hello ") == b"hello "
    assert stream.flush() == b""


# -- what a value adds -------------------------------------------------------------------------------


def test_a_key_printed_line_by_line_with_crlf_is_masked_line_by_line() -> None:
    printed = PEM.replace("\n", "\r\n").encode()
    masked = masker(PEM).mask_all(printed)
    assert masked == (
        b"-----BEGIN OPENSSH PRIVATE KEY-----\r\n***\r\n***\r\nlw==\r\n-----END OPENSSH PRIVATE KEY-----\r\n"
    )


def test_the_whole_key_printed_as_stored_is_one_mask() -> None:
    assert masker(PEM).mask_all(f"key:\n{PEM}done".encode()) == b"key:\n***done"


def test_pem_boundaries_and_short_lines_are_not_patterns_of_their_own() -> None:
    patterns = patterns_of(PEM)
    assert not any(pattern.startswith(b"-----") for pattern in patterns if b"\n" not in pattern)
    assert b"lw==" not in patterns


def test_a_value_set_with_a_trailing_newline_is_masked_without_it() -> None:
    assert masker(TOKEN + "\n").mask_all(f"[{TOKEN}]".encode()) == b"[***]"


@pytest.mark.parametrize(
    "encoded",
    [
        base64.b64encode(TOKEN.encode()),  # base64 of the value
        base64.b64encode(f"x-access-token:{TOKEN}".encode()),  # after a prefix (two bytes over)
        base64.b64encode(f"u:{TOKEN}".encode()),  # after a prefix (one byte over)
        base64.b64encode(f"{TOKEN}\n".encode()),  # echo "$TOKEN" | base64
    ],
)
def test_the_value_in_base64_is_masked_at_each_alignment(encoded: bytes) -> None:
    masked = masker(TOKEN).mask_all(b"Authorization: Basic " + encoded)
    assert masked.count(MASK) == 1
    # after the mask, only the character the next byte shares and the padding: never the value's encoding
    assert len(masked.split(MASK)[1]) <= 3


# -- what is refused ---------------------------------------------------------------------------------


def test_a_short_secret_is_refused_naming_it_and_never_its_value() -> None:
    with pytest.raises(SecretRefusedError) as refused:
        Masker.for_secrets({"LAB_VPN_KEY": "hunter2", "PIN": "1234", "GOOD": TOKEN})
    message = str(refused.value)
    assert "secret LAB_VPN_KEY: its value is 7 bytes long" in message
    assert "secret PIN: its value is 4 bytes long" in message
    assert "hunter2" not in message
    assert "1234" not in message
    assert "GOOD" not in message


def test_a_value_of_the_minimum_length_is_accepted() -> None:
    assert secret_problem("S", "x" * MIN_SECRET_BYTES) is None
    assert secret_problem("S", "x" * (MIN_SECRET_BYTES - 1)) is not None


def test_an_empty_value_is_skipped() -> None:
    assert masker("", TOKEN).patterns == patterns_of(TOKEN)


def test_an_empty_mask_is_refused() -> None:
    with pytest.raises(ValueError, match="the mask must not be empty"):
        Masker(patterns_of(TOKEN), mask=b"")


def test_a_cut_given_more_covered_bytes_than_the_buffer_holds_is_refused() -> None:
    with pytest.raises(ValueError, match="covered is 5, outside the 3 bytes given"):
        masker(TOKEN).cut(b"abc", covered=5)


# -- streaming ---------------------------------------------------------------------------------------


def test_a_secret_split_at_every_offset_is_masked() -> None:
    data = f"before {TOKEN} after".encode()
    masking = masker(TOKEN)
    for split in range(len(data) + 1):
        stream = OutputMasker(masking)
        assert stream.feed(data[:split]) + stream.feed(data[split:]) + stream.flush() == b"before *** after"


def test_a_secret_fed_a_byte_at_a_time_is_masked() -> None:
    assert streamed(masker(TOKEN, PEM), f"a {TOKEN} b\n{PEM}".encode(), [1]) == b"a *** b\n***"


def test_at_most_the_longest_pattern_less_one_byte_is_held_back() -> None:
    masking = masker(TOKEN)
    cut = masking.cut(b"x" * 1000)
    assert len(b"x" * 1000) - cut.consumed == masking.held == masking.longest - 1
    assert cut.text == b"x" * cut.consumed


def test_an_overlapping_run_continued_in_the_next_chunk_stays_one_mask() -> None:
    masking = masker("abababab")
    assert streamed(masking, b"<" + b"ab" * 40 + b">", [3, 1, 7]) == b"<***>"


def test_a_cut_resumed_from_its_numbers_alone_equals_the_stream() -> None:
    """What an agent restarted mid-job does: keep ``consumed`` and ``covered``, re-read the rest."""
    masking = masker("abcdefgh", "fghijklmnop")
    data = b"1 abcdefghijklmnop 2 abcdefghabcdefgh" * 5
    out, at, covered, cuts = [], 0, 0, 0
    while at + 40 <= len(data):
        cut = masking.cut(data[at : at + 40], covered)  # read afresh from the kept offset
        assert cut.consumed == 40 - masking.held
        out.append(cut.text)
        at, covered, cuts = at + cut.consumed, cut.covered, cuts + 1
    out.append(masking.cut(data[at:], covered, final=True).text)
    assert cuts > 5
    assert b"".join(out) == masking.mask_all(data) == b"1 *** 2 ******" * 5


# -- properties --------------------------------------------------------------------------------------

# Secrets over a few letters and line ends share prefixes and overlap often; none holds the mask's '*'.
# Longer ones make the filter read every third word or fewer.
SECRET_ALPHABET = "ab\r\n"
secret_values = st.sampled_from([MIN_SECRET_BYTES, 15, 27]).flatmap(
    lambda shortest: st.lists(
        st.text(alphabet=SECRET_ALPHABET, min_size=shortest, max_size=shortest + 12), min_size=1, max_size=4
    )
)


@st.composite
def output_with_secrets(draw: st.DrawFn) -> tuple[Masker, bytes, list[int]]:
    """A masker, output made of its secrets and of filler (the same letters, and bytes that are not
    UTF-8), and chunk sizes (1-byte chunks among them)."""
    values = draw(secret_values)
    filler = st.one_of(
        st.text(alphabet=SECRET_ALPHABET + "x ", max_size=12).map(str.encode), st.binary(max_size=6)
    )
    pieces = draw(st.lists(st.one_of(st.sampled_from(values).map(str.encode), filler), max_size=30))
    sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=8))
    return masker(*values), b"".join(pieces), sizes


@given(output_with_secrets())
def test_output_masked_in_any_chunks_equals_it_masked_at_once(case: tuple[Masker, bytes, list[int]]) -> None:
    masking, data, sizes = case
    assert streamed(masking, data, sizes) == masking.mask_all(data)


@given(output_with_secrets())
def test_output_masked_a_byte_at_a_time_equals_it_masked_at_once(
    case: tuple[Masker, bytes, list[int]],
) -> None:
    masking, data, _ = case
    assert streamed(masking, data, [1]) == masking.mask_all(data)


@given(output_with_secrets())
def test_masking_at_once_follows_the_rule(case: tuple[Masker, bytes, list[int]]) -> None:
    masking, data, _ = case
    assert masking.mask_all(data) == brute_force(masking.patterns, data)


@given(output_with_secrets())
def test_masked_output_holds_no_secret(case: tuple[Masker, bytes, list[int]]) -> None:
    masking, data, sizes = case
    out = streamed(masking, data, sizes)
    assert not [pattern for pattern in masking.patterns if pattern in out]


@given(st.binary(min_size=MIN_SECRET_BYTES, max_size=40), st.binary(max_size=300), st.integers(0, 300))
def test_a_secret_of_any_bytes_anywhere_in_any_bytes_is_masked(secret: bytes, noise: bytes, at: int) -> None:
    """Bytes of any kind, around and in the secret: the filter's 4-byte words land anywhere."""
    masking = Masker(frozenset({secret}), mask=b"\x00MASK\x00")
    data = noise[:at] + secret + noise[at:]
    assert (
        streamed(masking, data, [7, 1, 64])
        == masking.mask_all(data)
        == brute_force(masking.patterns, data, b"\x00MASK\x00")
    )
