"""The checks of a repository tarball's members and its limits, member by member, without a disk."""

from __future__ import annotations

import pytest

from kerrigan.core.unpacking import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_FILES,
    GIB,
    HEADER_ALLOWANCE,
    MAX_LINK_HOPS,
    Kind,
    Member,
    Placement,
    TarballCheck,
    TarballRefusedError,
    UnpackLimits,
    amount,
)


def admit_all(*members: Member, limits: UnpackLimits | None = None) -> tuple[TarballCheck, list[Placement]]:
    """A check that admitted a ``top`` folder and then ``members``, and what each became."""
    check = TarballCheck(limits or UnpackLimits())
    assert check.admit(Member("top", Kind.FOLDER)) is None
    placed = [check.admit(member) for member in members]
    return check, [placement for placement in placed if placement is not None]


def file(name: str, size: int = 0, mode: int = 0o644) -> Member:
    return Member(f"top/{name}", Kind.FILE, size=size, mode=mode)


def link(name: str, target: str) -> Member:
    return Member(f"top/{name}", Kind.SYMLINK, linkname=target)


def links_of(*members: Member) -> list[str]:
    check, _ = admit_all(*members)
    return [placement.shown for placement in check.links()]


def refusal(*members: Member, limits: UnpackLimits | None = None) -> str:
    """The message the members (after the ``top`` folder) are refused with, links included."""
    with pytest.raises(TarballRefusedError) as refused:
        admit_and_resolve(*members, limits=limits)
    return str(refused.value)


def admit_and_resolve(*members: Member, limits: UnpackLimits | None = None) -> None:
    check, _ = admit_all(*members, limits=limits)
    list(check.links())


# -- limits ------------------------------------------------------------------------------------------


def test_the_default_limits_are_4_gib_and_200000_members() -> None:
    assert UnpackLimits() == UnpackLimits(max_bytes=4 * GIB, max_files=200_000)
    assert (DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES) == (4 * GIB, 200_000)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_bytes", 0), ("max_bytes", -1), ("max_files", 0), ("max_files", True), ("max_bytes", 1.5)],
)
def test_limits_must_be_whole_numbers_of_at_least_one(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a whole number of at least 1, got {value!r}"):
        UnpackLimits(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("size", "spoken"),
    [
        (4 * GIB, "4 GiB"),
        (64 << 20, "64 MiB"),
        (1536 << 20, "1536 MiB"),
        (8192, "8 KiB"),
        (4000, "4000 bytes"),
    ],
)
def test_a_limit_is_spoken_of_in_its_largest_whole_unit(size: int, spoken: str) -> None:
    assert amount(size) == spoken


def test_members_past_the_file_limit_are_refused_and_the_top_folder_does_not_count() -> None:
    limits = UnpackLimits(max_files=3)
    admit_all(Member("top/src", Kind.FOLDER), file("src/a.c"), link("b", "src/a.c"), limits=limits)
    assert refusal(file("a"), file("b"), file("c"), file("d"), limits=limits) == (
        "the repository's tarball has more than 3 files"
    )


def test_a_file_whose_header_passes_the_byte_limit_is_refused_before_its_contents() -> None:
    check, _ = admit_all(file("a", size=6), limits=UnpackLimits(max_bytes=10))
    check.count_bytes(6)
    with pytest.raises(
        TarballRefusedError, match=r"^the repository.s tarball unpacks to more than 10 bytes$"
    ):
        check.admit(file("b", size=5))
    assert check.admit(file("c", size=4)) is not None


def test_bytes_written_are_counted_up_to_the_limit_and_not_one_past_it() -> None:
    check = TarballCheck(UnpackLimits(max_bytes=2 << 20))
    check.count_bytes(1 << 20)
    check.count_bytes(1 << 20)  # exactly the limit
    assert check.bytes == 2 << 20
    with pytest.raises(TarballRefusedError, match="unpacks to more than 2 MiB"):
        check.count_bytes(1)
    assert check.bytes == 2 << 20


# -- names -------------------------------------------------------------------------------------------


def test_the_top_folder_is_stripped_and_dots_and_doubled_slashes_dropped() -> None:
    _, placed = admit_all(
        Member("top/", Kind.FOLDER), file("src/main.c"), Member("top/./docs//guide.md", Kind.FILE)
    )
    assert [(p.path, p.kind) for p in placed] == [
        (("src", "main.c"), Kind.FILE),
        (("docs", "guide.md"), Kind.FILE),
    ]


def test_the_top_folder_is_whatever_the_first_member_is_in() -> None:
    check = TarballCheck()
    placement = check.admit(Member("octo-firmware-c7e2a9d/README.md", Kind.FILE))
    assert placement is not None
    assert placement.path == ("README.md",)
    with pytest.raises(TarballRefusedError, match="outside the tarball's top folder 'octo-firmware-c7e2a9d'"):
        check.admit(Member("README.md", Kind.FILE))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("", "a member of the tarball has an empty name", id="empty"),
        pytest.param("./", "member './' has an empty name", id="only-dots"),
        pytest.param("top/a\0b", "member 'top/a\\x00b' has a NUL in its name", id="nul"),
        pytest.param("/etc/passwd", "member '/etc/passwd' has an absolute name", id="absolute"),
        pytest.param("//etc/passwd", "member '//etc/passwd' has an absolute name", id="doubled-absolute"),
        pytest.param("top/../x", "member 'top/../x' has '..' in its name", id="dot-dot-out"),
        pytest.param("top/a/../b", "member 'top/a/../b' has '..' in its name", id="dot-dot-staying-in"),
        pytest.param("top/a/..", "member 'top/a/..' has '..' in its name", id="dot-dot-last"),
        pytest.param("other/x", "member 'other/x' is outside the tarball's top folder 'top'", id="other-top"),
    ],
)
def test_names_that_could_leave_the_workspace_are_refused(name: str, message: str) -> None:
    assert refusal(Member(name, Kind.FILE)) == message


def test_a_top_folder_that_is_not_a_folder_is_refused() -> None:
    check = TarballCheck()
    with pytest.raises(
        TarballRefusedError, match="member 'top' is the tarball's top folder but a symbolic link"
    ):
        check.admit(Member("top", Kind.SYMLINK, linkname="/"))


def test_names_with_backslashes_and_dots_inside_parts_are_plain_names() -> None:
    _, placed = admit_all(file("a\\..\\b"), file("..hidden"), file("x..y"))
    assert [p.path for p in placed] == [("a\\..\\b",), ("..hidden",), ("x..y",)]


def test_the_same_path_twice_is_refused_except_a_folder() -> None:
    admit_all(Member("top/src", Kind.FOLDER), Member("top/src/", Kind.FOLDER), file("src/a"))
    assert refusal(file("a"), file("a")) == "member 'a' appears twice in the tarball"
    assert refusal(file("a"), Member("top/a", Kind.FOLDER)) == "member 'a' appears twice in the tarball"
    assert refusal(file("src/a"), link("src", "elsewhere")) == "member 'src' appears twice in the tarball"


def test_a_member_inside_a_file_is_refused() -> None:
    assert refusal(file("a"), file("a/b")) == "member 'a/b' is inside 'a', which is not a folder"


# -- modes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "kept"),
    [
        (0o644, 0o644),
        (0o755, 0o755),
        (0o600, 0o644),
        (0o700, 0o755),
        (0o000, 0o644),
        (0o011, 0o644),  # only others may execute: git would record 100644
        (0o4755, 0o755),
        (0o2755, 0o755),
        (0o1777, 0o755),
        (0o7666, 0o644),
    ],
)
def test_file_modes_are_masked_to_what_git_records(mode: int, kept: int) -> None:
    _, [placement] = admit_all(file("tool", mode=mode))
    assert placement.mode == kept


@pytest.mark.parametrize("mode", [0o700, 0o777, 0o3777, 0o000])
def test_folders_are_always_0o755(mode: int) -> None:
    _, [placement] = admit_all(Member("top/board", Kind.FOLDER, mode=mode))
    assert placement.mode == 0o755


# -- types -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (Kind.CHARACTER_DEVICE, "member 'dev/x' is a character device"),
        (Kind.BLOCK_DEVICE, "member 'dev/x' is a block device"),
        (Kind.FIFO, "member 'dev/x' is a FIFO"),
        (Kind.SPARSE_FILE, "member 'dev/x' is a sparse file"),
        (Kind.OTHER, "member 'dev/x' is a member of a type other than file, folder or link"),
    ],
)
def test_members_other_than_files_folders_and_links_are_refused(kind: Kind, message: str) -> None:
    assert refusal(Member("top/dev/x", kind)) == message


def test_a_negative_size_is_refused() -> None:
    assert refusal(file("a", size=-1)) == "member 'a' has a negative size"


# -- symbolic links ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    [
        "src/main.c",
        "./src/../src/main.c",
        ".",
        "..",  # from inside src/: the workspace itself
        "../src//main.c",
        "missing/later",  # a dangling link is the job's business, not an escape
    ],
)
def test_links_resolving_inside_the_workspace_are_kept(target: str) -> None:
    assert links_of(file("src/main.c"), link("src/link", target)) == ["src/link"]


@pytest.mark.parametrize(
    "target",
    ["/etc/passwd", "/", "../..", "../../outside", "a/../../..", "../src/../../x"],
)
def test_links_resolving_outside_the_workspace_are_refused(target: str) -> None:
    assert refusal(link("src/link", target)) == "member 'src/link' links outside the workspace"


@pytest.mark.parametrize(
    ("target", "message"),
    [("", "member 'l' is a link with no target"), ("a\0b", "member 'l' has a NUL in its link target")],
)
def test_links_without_a_usable_target_are_refused(target: str, message: str) -> None:
    assert refusal(link("l", target)) == message


def test_a_link_is_followed_through_the_tarballs_other_links() -> None:
    # Read as text, "sub/up/../.." is sub, then the top; followed as the disk follows it, sub/up is the top
    # already, and the second ".." leaves.
    assert (
        refusal(link("sub/up", ".."), link("out", "sub/up/../.."))
        == "member 'out' links outside the workspace"
    )
    assert links_of(link("sub/up", ".."), link("ok", "sub/up/sub")) == ["sub/up", "ok"]


def test_a_link_is_resolved_against_links_that_come_after_it() -> None:
    # git archive sorts by name: "a" comes before the "z" it goes through.
    assert refusal(link("a", "z/.."), Member("top/deep", Kind.FOLDER), link("z", "."), file("b")) == (
        "member 'a' links outside the workspace"
    )
    assert links_of(link("a", "z/x"), Member("top/deep", Kind.FOLDER), link("z", "deep")) == ["a", "z"]


def test_a_link_through_a_link_that_escapes_names_the_escaping_link() -> None:
    assert refusal(link("a", "b/x"), link("b", "../outside")) == "member 'b' links outside the workspace"


def test_the_long_chain_of_cve_2025_4517_is_resolved_whatever_its_length() -> None:
    # Past PATH_MAX on disk: the resolution is lexical, so nothing stops it early.
    folder, steps = "d" * 247, "abcdefghijklmnop"
    members: list[Member] = []
    path = "top"
    for step in steps:
        members += [
            Member(f"{path}/{folder}", Kind.FOLDER),
            Member(f"{path}/{step}", Kind.SYMLINK, linkname=folder),
        ]
        path = f"{path}/{folder}"
    members.append(Member(f"{path}/end", Kind.SYMLINK, linkname="../" * len(steps)))
    deep = "/".join([folder] * len(steps))
    members.append(link("escape", f"{deep}/end/../outside"))
    assert refusal(*members) == "member 'escape' links outside the workspace"
    # and the chain as the write-ups build it, through the one-letter links, never gets that far:
    chain = "/".join(steps) + "/end"
    assert refusal(*members[:-2], Member(f"top/{chain}", Kind.SYMLINK, linkname="..")) == (
        f"member '{chain}' passes through the link 'a'"
    )


def test_members_through_a_link_are_refused_wherever_the_link_leads() -> None:
    assert refusal(file("src/a"), link("l", "src"), file("l/b")) == "member 'l/b' passes through the link 'l'"
    assert (
        refusal(link("l", "src"), Member("top/l/x", Kind.FOLDER))
        == "member 'l/x' passes through the link 'l'"
    )


@pytest.mark.parametrize("length", [MAX_LINK_HOPS - 1, MAX_LINK_HOPS])
def test_a_link_followed_through_up_to_40_more_resolves(length: int) -> None:
    chain = [link(f"l{n}", f"l{n + 1}") for n in range(length)] + [link(f"l{length}", "file"), file("file")]
    assert len(links_of(*chain)) == length + 1


@pytest.mark.parametrize("reverse", [False, True], ids=["head-first", "tail-first"])
def test_a_link_followed_through_more_than_40_is_refused_in_any_order(reverse: bool) -> None:
    chain = [link(f"l{n}", f"l{n + 1}") for n in range(MAX_LINK_HOPS + 1)] + [
        link(f"l{MAX_LINK_HOPS + 1}", ".")
    ]
    message = refusal(*(reversed(chain) if reverse else chain))
    assert message.endswith(f"starts a loop of links or a chain of more than {MAX_LINK_HOPS}")


@pytest.mark.parametrize(
    "members",
    [
        pytest.param([link("a", "a")], id="itself"),
        pytest.param([link("a", "b"), link("b", "a")], id="two"),
        pytest.param([link("a", "b/x"), link("b", "a/y")], id="through-each-other"),
    ],
)
def test_a_loop_of_links_is_refused(members: list[Member]) -> None:
    assert "starts a loop of links" in refusal(*members)


# -- hard links --------------------------------------------------------------------------------------


def test_a_hard_link_to_a_file_earlier_in_the_tarball_is_kept() -> None:
    _, placed = admit_all(
        file("docs/readme.md"),
        Member("top/copy", Kind.HARD_LINK, linkname="top/docs/readme.md"),
        Member("top/copy2", Kind.HARD_LINK, linkname="top/copy"),
    )
    assert [(p.path, p.linked) for p in placed[1:]] == [
        (("copy",), ("docs", "readme.md")),
        (("copy2",), ("copy",)),
    ]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param(
            "top/later", "member 'copy' is a hard link to 'top/later', which is not a file", id="later"
        ),
        pytest.param(
            "top/src", "member 'copy' is a hard link to 'top/src', which is not a file", id="folder"
        ),
        pytest.param(
            "top/link", "member 'copy' is a hard link to 'top/link', which is not a file", id="symlink"
        ),
        pytest.param("top", "member 'copy' is a hard link to 'top', which is not a file", id="the-top"),
        pytest.param(
            "other/a", "member 'copy' is a hard link to 'other/a', which is not a file", id="other-top"
        ),
        pytest.param("/etc/passwd", "member 'copy' is a hard link to '/etc/passwd', which", id="absolute"),
        pytest.param("/top/src/a", "member 'copy' is a hard link to '/top/src/a', which", id="absolute-top"),
        pytest.param("top/../top/src/a", "member 'copy' is a hard link to 'top/../top/src/a'", id="dot-dot"),
        pytest.param("top/src/a\0", "member 'copy' is a hard link to 'top/src/a\\x00', which", id="nul"),
        pytest.param("", "member 'copy' is a hard link with no target", id="empty"),
    ],
)
def test_a_hard_link_to_anything_but_an_earlier_file_is_refused(target: str, message: str) -> None:
    members = [file("src/a"), link("link", "src/a"), Member("top/copy", Kind.HARD_LINK, linkname=target)]
    assert refusal(*members, file("later")).startswith(message)


def test_the_tar_stream_may_hold_the_contents_limit_and_a_header_allowance_per_member() -> None:
    check = TarballCheck(UnpackLimits(max_bytes=10_000, max_files=2))
    check.count_stream(10_000 + 3 * HEADER_ALLOWANCE)  # two members and the end of the tar
    with pytest.raises(TarballRefusedError, match="unpacks to more than 10000 bytes"):
        check.count_stream(1)
