"""The checks of an artifact's zip members, without I/O."""

from __future__ import annotations

import stat

import pytest

from kerrigan.core.artifact_archive import ArchiveRefusedError, ZipCheck, ZipEntry
from kerrigan.core.unpacking import UnpackLimits


def check(*names: str, limits: UnpackLimits | None = None) -> ZipCheck:
    found = ZipCheck("image", limits or UnpackLimits())
    for name in names:
        found.admit(ZipEntry(name))
    return found


def test_files_and_folders_are_placed_below_the_folder_with_their_modes() -> None:
    zipped = ZipCheck("image")
    assert zipped.admit(ZipEntry("out/", stat.S_IFDIR | 0o755)) == (("out",), True, 0o755)
    assert zipped.admit(ZipEntry("out/./flash.sh", stat.S_IFREG | 0o755)) == (
        ("out", "flash.sh"),
        False,
        0o755,
    )
    assert zipped.admit(ZipEntry("out/image.bin")) == (("out", "image.bin"), False, 0o644)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["/etc/passwd"], "member '/etc/passwd' has an absolute name"),
        (["out/../../x"], "member 'out/../../x' has '..' in its name"),
        (["out\\x.bin"], "member 'out\\\\x.bin' has a backslash in its name"),
        (["a", "a"], "member 'a' appears twice"),
        (["a", "a/b"], "member 'a/b' is inside 'a', a file"),
        (
            [
                "",
            ],
            "a member has an empty name or a NUL in it",
        ),
    ],
)
def test_a_member_that_could_leave_its_folder_is_refused_naming_it(names: list[str], message: str) -> None:
    with pytest.raises(ArchiveRefusedError) as refused:
        check(*names)
    assert str(refused.value) == f"artifact 'image': {message}"


def test_links_and_devices_are_refused() -> None:
    for kind in (stat.S_IFLNK, stat.S_IFCHR, stat.S_IFIFO):
        with pytest.raises(ArchiveRefusedError, match="is not a file or a folder"):
            ZipCheck("image").admit(ZipEntry("out/x", kind | 0o644))


def test_bytes_are_counted_as_inflated_and_members_against_the_limits() -> None:
    limits = UnpackLimits(max_bytes=10, max_files=2)
    zipped = check("a", "b", limits=limits)
    zipped.count_bytes(10)
    with pytest.raises(ArchiveRefusedError, match="unpacks to more than 10 bytes"):
        zipped.count_bytes(1)
    with pytest.raises(ArchiveRefusedError, match="has more than 2 files"):
        zipped.admit(ZipEntry("c"))
