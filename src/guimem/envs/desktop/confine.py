"""Start an app that may write only inside the session's folder (Linux Landlock), then become it.

``python confine.py FOLDER -- PROGRAM ARGS...``: restricts itself with a Landlock ruleset that
handles every file-system *write* right (write, truncate, create, remove, rename, link) and grants
them only beneath ``FOLDER`` and ``/dev``, then execs the program, which keeps the restriction and
passes it to its children. Reading stays allowed everywhere, so the file chooser still shows the
whole disk, but an agent that wanders out of the session's home (File System Root, Other
Locations) and saves there gets the app's own "permission denied" instead of overwriting a real
file. No privilege is needed (``PR_SET_NO_NEW_PRIVS`` and three system calls).

A script of its own, stdlib only, so that starting an app costs no import of guimem. When the
kernel has no Landlock (before Linux 5.13, or disabled at boot), ``landlock_abi`` says 0 and the
env starts the app unconfined, with a warning.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86-64 and aarch64 share these numbers
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
# LANDLOCK_ACCESS_FS_*: write_file, remove_dir, remove_file, make_char, make_dir, make_reg, make_sock,
# make_fifo, make_block, make_sym (ABI 1), refer (ABI 2), truncate (ABI 3)
_WRITES_ABI1 = (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) \
    | (1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or on a system other than Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def write_rights(abi: int) -> int:
    """Every write right the kernel's ABI knows."""
    return _WRITES_ABI1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)


def confine(writable: list[str]) -> None:
    """Restrict this process (and what it execs) to writing beneath ``writable``.

    Raises:
        OSError: The kernel refused (no Landlock, or a path cannot be opened).
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError("this kernel has no Landlock")
    libc, rights = _libc(), write_rights(abi)
    attr = ctypes.create_string_buffer(struct.pack("=Q", rights))
    ruleset = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(len(attr.raw)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
                if libc.syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), rule,
                                ctypes.c_uint32(0)) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


def main(argv: list[str]) -> None:
    """``FOLDER -- PROGRAM ARGS...``: confine to FOLDER (and /dev), then exec PROGRAM."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: confine.py FOLDER -- PROGRAM [ARGS...]")
    confine([argv[0], "/dev"])
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
