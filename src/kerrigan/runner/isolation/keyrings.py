"""A job's kernel keyrings are its own: a user namespace of its own, made by the launcher for the command.

The kernel keeps keys per user, not per process: a key a job adds to its user keyring (``keyctl add user x
secret @u``), its user session keyring or its persistent keyring (``keyctl get_persistent``; Kerberos keeps
tickets there) outlives its last process, and a later job given the same uid would find it there. Since
Linux 5.3 those keyrings belong to the user namespace (the persistent keyring since 3.13; before 5.3 the
user keyrings go with the uid's last process). So the launcher starts the command in a user namespace of its
own, mapping every id to itself (the job's files, groups and processes look the same; the job has no
capability in it, nor outside): the keyrings the job makes are that namespace's and go when it does, with
the job's last process. The namespace owns nothing else (the mount, IPC and other namespaces are the host's
or the launcher's), so it gives the job no power over anything.

A job cannot name the host namespace's keyrings of its uid, only reach them by serial number (in
``/proc/keys``) when they exist; before the command starts, the launcher empties those the uid holds, as the
uid (root cannot reach another user's keys), and invalidates every other key the uid owns there: what a job
of an older agent, or a job before this one, left there is gone, and not readable by its serial number in
the moment the kernel takes to drop a key unlinked from a keyring. None is made where there was none.

Only the standard library is used (the launcher imports this); ``keyctl`` is called by its system call
number, which :data:`KEYCTL_NUMBERS` knows for the architectures Linux runs on here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
from pathlib import Path
from typing import Final

CLONE_NEWUSER: Final = 0x10000000
IDENTITY_MAP: Final = "0 0 4294967295\n"  # every id to itself, as the host's own namespace maps them
# The keyctl system call by machine (add_key and request_key are the two numbers below it everywhere).
KEYCTL_NUMBERS: Final = {
    "x86_64": 250,
    "aarch64": 219,
    "riscv64": 219,
    "loongarch64": 219,
    "armv7l": 311,
    "armv6l": 311,
    "i686": 288,
    "i386": 288,
    "ppc64le": 271,
    "ppc64": 271,
    "s390x": 280,
}
KEYCTL_CLEAR: Final = 7
KEYCTL_LINK: Final = 8
KEYCTL_INVALIDATE: Final = 21
# The keyrings the kernel keeps for a uid (user, user session, persistent), as /proc/keys names them.
UID_KEYRINGS: Final = ("_uid.{uid}", "_uid_ses.{uid}", "_persistent.{uid}")


class NamespaceError(OSError):
    """The job's user namespace could not be made or mapped; the message names the step."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter_own_user_namespace(ready: int, go: int) -> None:
    """In the command's process, still root: a new user namespace; says so on ``ready`` (or the error),
    then waits on ``go`` until the launcher has mapped it (:func:`map_user_namespace`)."""
    try:
        if _libc().unshare(CLONE_NEWUSER) != 0:
            code = ctypes.get_errno()
            raise NamespaceError(code, f"unshare(CLONE_NEWUSER): {os.strerror(code)}")
    except NamespaceError as err:
        os.write(ready, f"{err}".encode())
        raise
    finally:
        os.close(ready)
    answer = os.read(go, 512)
    os.close(go)
    if answer != b"mapped":
        raise NamespaceError(0, answer.decode(errors="replace") or "the launcher did not map the namespace")


def map_user_namespace(child: int, ready: int, go: int) -> None:
    """In the launcher: once the command's process made its namespace, map every id to itself in it (a
    mapping only a process with the host's CAP_SETUID may write), then let it go on. Raises
    :class:`NamespaceError` when it could not (the command's process is then told, and ends)."""
    said = os.read(ready, 512)
    os.close(ready)
    try:
        if said:
            raise NamespaceError(0, said.decode(errors="replace"))
        for name in ("uid_map", "gid_map"):
            try:
                Path(f"/proc/{child}/{name}").write_text(IDENTITY_MAP, encoding="ascii")
            except OSError as err:
                raise NamespaceError(err.errno, f"writing /proc/{child}/{name}: {err.strerror}") from err
        os.write(go, b"mapped")
    except NamespaceError as err:
        with contextlib.suppress(OSError):  # the command's process may have ended already
            os.write(go, str(err).encode())
        raise
    finally:
        os.close(go)


def uid_keyrings(proc_keys: str, uid: int) -> dict[str, int]:
    """The serial numbers of ``uid``'s own user, user session and persistent keyrings in ``/proc/keys`` (as
    that uid reads it: the keys it may view), by name."""
    wanted = {name.format(uid=uid) for name in UID_KEYRINGS}
    found = {}
    for line in proc_keys.splitlines():
        fields = line.split(None, 8)
        if len(fields) < 9 or fields[7] != "keyring" or fields[5] != str(uid):
            continue
        name = fields[8].split(":", 1)[0]
        if name in wanted:
            found[name] = int(fields[0], 16)
    return found


def uid_keys(proc_keys: str, uid: int) -> list[int]:
    """The serial numbers of the keys ``uid`` owns in ``/proc/keys`` (as that uid reads it) other than its
    own keyrings (:func:`uid_keyrings`): what a job left, in them or linked anywhere else."""
    own = {name.format(uid=uid) for name in UID_KEYRINGS}
    found = []
    for line in proc_keys.splitlines():
        fields = line.split(None, 8)
        if len(fields) < 9 or fields[5] != str(uid):
            continue
        if fields[7] == "keyring" and fields[8].split(":", 1)[0] in own:
            continue
        found.append(int(fields[0], 16))
    return found


def empty_host_keyrings(uid: int) -> None:
    """Empty ``uid``'s keyrings in the host's user namespace and invalidate every other key it owns there,
    from a process that becomes that uid (its keys are its own: root may not empty them). Best effort: a
    keyring or key its owner may not change (a job of an older agent may have taken the right away) is
    left, and is out of a job's reach in its own namespace but by serial number; a host without keyctl has
    none to empty."""
    number = KEYCTL_NUMBERS.get(platform.machine())
    if number is None:
        return
    child = os.fork()
    if child == 0:  # pragma: no cover -- the child process; its effect is tested from outside
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            listed = Path("/proc/keys").read_text(encoding="utf-8", errors="replace")
            serials = uid_keyrings(listed, uid)
            libc = _libc()
            # Invalidated at once: a key unlinked by the clearing below stays readable by its serial until
            # the kernel's next RCU grace period has passed, long enough for a job started now to read it.
            for serial in uid_keys(listed, uid):
                libc.syscall(ctypes.c_long(number), ctypes.c_long(KEYCTL_INVALIDATE), ctypes.c_long(serial))
            for serial in serials.values():
                libc.syscall(ctypes.c_long(number), ctypes.c_long(KEYCTL_CLEAR), ctypes.c_long(serial))
            user, session = (serials.get(name.format(uid=uid)) for name in UID_KEYRINGS[:2])
            if user is not None and session is not None:  # the session keyring holds the user's, as made
                libc.syscall(*(ctypes.c_long(value) for value in (number, KEYCTL_LINK, user, session)))
        finally:
            os._exit(0)
    os.waitpid(child, 0)
