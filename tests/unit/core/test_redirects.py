"""Where a browser may be sent back to after sign-in: a path on this site only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.redirects import is_local_path, local_path

# What aiohttp hands over from ``?next=`` is decoded once already: these are values after that.
HOSTILE = [
    "/\t/evil.example",  # browsers strip the tab: //evil.example
    "/%09/evil.example",
    "/\n/evil.example",
    "/\r\n/evil.example",
    "/%0d%0a/evil.example",
    "%0d%0a",
    "/pools%0d%0aSet-Cookie:x=1",
    "//evil.example",
    "///evil.example",
    "/\\evil.example",
    "/%5Cevil.example",
    "/%5cevil.example",
    "/pools\\..\\x",
    "\\\\evil.example",
    "/%2F/evil.example",
    "%2F%2Fevil.example",
    "/%252F/evil.example",  # double-encoded
    "/%2509/evil.example",
    "/%25252F/evil.example",  # encoded three times
    "/%2525252525252F/evil.example",  # more layers than a followed link has
    "https://evil.example",
    "http:/evil.example",
    "javascript:alert(1)",
    "JavaScript:alert(1)",
    "evil.example",
    "pools",
    "",
    " /pools",
    "/ /evil.example",
    "/pools?label=team%3DLab%20A",  # harmless, but whitespace once decoded: refused rather than judged
    "/\x00",
    "/%00",
    "/pools\u200b",  # zero-width space
    "/%E2%80%8B",  # the same, encoded
    "/%e2%80%ae",  # a right-to-left override
    "/\u3000/evil.example",  # ideographic space
    "/caf\u00e9",  # not ASCII as given
    "/%ff",  # not UTF-8
    "/" + "a" * 3000,
]
GOOD = [
    "/",
    "/pools",
    "/pools/x?y=1#z",
    "/pools/sdk-2-2-som",
    "/devices/modalix-bluebox?tab=labels",
    "/sessions/12#job-3",
    "/explain?x=100%",
    "/caf%C3%A9",
    "/pools/@evil.example",  # a path segment, not a host
    "/.//evil.example",  # resolved against this site: the host is already decided
]


@pytest.mark.parametrize("target", HOSTILE)
def test_a_target_that_could_leave_the_site_falls_back_to_the_front_page(target: str) -> None:
    assert not is_local_path(target)
    assert local_path(target) == "/"


@pytest.mark.parametrize("target", GOOD)
def test_a_path_on_this_site_is_kept_as_given(target: str) -> None:
    assert local_path(target) == target


def test_nothing_given_falls_back() -> None:
    assert local_path(None) == "/"
    assert local_path(None, fallback="/pools") == "/pools"


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("/\\%09aA2fF5cC:.\t\n @"), max_size=20))
def test_an_accepted_target_never_names_a_host_however_a_browser_reads_it(target: str) -> None:
    if not is_local_path(target):
        return
    # What a lenient browser makes of it: tabs and newlines gone, backslashes read as slashes.
    read = target
    for _ in range(6):
        read = read.replace("%09", "").replace("%5c", "/").replace("%5C", "/").replace("%2f", "/")
        read = read.replace("%2F", "/").replace("%25", "%")
    read = read.replace("\t", "").replace("\n", "").replace("\\", "/")
    assert read.startswith("/")
    assert not read.startswith("//")
