"""Trajectory files: JSONL, one episode per line, screenshots in a sibling artifacts folder.

The format is documented in ``docs/formats.md``. Loading is all-or-nothing: a malformed line fails
the whole file with its path, line number and field.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from guimem.errors import DataError, FileConflictError, TrajectoryFormatError
from guimem.types.episode import TRAJECTORY_FORMAT_VERSION, Trajectory
from guimem.types.strictjson import StrictJSONError, loads_strict


def read_regular(path: Path | str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes: a device, FIFO, socket or folder is refused
    without blocking on it (opened non-blocking, checked with fstat before any read), and so is a larger file.

    Raises:
        DataError: Not a regular file, over ``limit`` bytes, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        fix = {errno.ENOENT: "check the path: there is no such file", errno.EACCES: "make the file readable",
               errno.ENOTDIR: "check the path: a part of it is a file, not a folder"}.get(exc.errno or 0)
        raise DataError(f"cannot read: {exc.strerror or exc}", path=str(path), suggestion=fix) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DataError("is not a regular file (a folder, device, FIFO or socket)", path=str(path))
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise DataError(f"is larger than {limit} bytes", path=str(path))
    return data


def artifacts_dir(trajectory_file: Path) -> Path:
    """The folder that holds a trajectory file's screenshots: ``<file>.artifacts/``."""
    return trajectory_file.with_name(trajectory_file.name + ".artifacts")


def _field_of(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return ".".join(str(p) for p in first["loc"]) or "<root>"


def parse_trajectory_line(text: str, *, path: str = "<string>", line: int = 1) -> Trajectory:
    """Parse one JSONL line into a `Trajectory`.

    Raises:
        TrajectoryFormatError: The line is not JSON, not the current format version, or a field is wrong.
    """
    try:
        raw = loads_strict(text, nul=True)
    except StrictJSONError as exc:
        raise TrajectoryFormatError(str(exc), path=path, line=line) from None
    if not isinstance(raw, dict):
        raise TrajectoryFormatError("each line must be a JSON object (one episode)", path=path, line=line)
    version = raw.get("version", TRAJECTORY_FORMAT_VERSION)
    if version != TRAJECTORY_FORMAT_VERSION:
        raise TrajectoryFormatError(
            f"format version {version!r} is not supported (this guimem reads {TRAJECTORY_FORMAT_VERSION})",
            path=path, line=line, field="version",
        )
    try:
        return Trajectory.model_validate(raw)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"]
        raise TrajectoryFormatError(msg, path=path, line=line, field=_field_of(exc)) from None


MAX_TRAJECTORY_LINE = 64 * 1024 * 1024
"""The longest episode line read (bytes): an episode of hundreds of steps with their screens is a few MB."""


def iter_trajectories(path: Path | str) -> Iterator[Trajectory]:
    """Yield the episodes of a JSONL file one by one (blank lines are skipped)."""
    p = Path(path)
    if not p.exists():
        raise TrajectoryFormatError("file does not exist", path=str(p),
                                    suggestion="check the path: there is no such file")
    with p.open("rb") as fh:
        for number, raw in enumerate(iter(lambda: fh.readline(MAX_TRAJECTORY_LINE + 1), b""), start=1):
            if len(raw) > MAX_TRAJECTORY_LINE:  # never read a line without end whole (a file of one 3 GB line)
                raise TrajectoryFormatError(f"the line is longer than {MAX_TRAJECTORY_LINE:,} bytes", path=str(p),
                                            line=number, suggestion="one episode per line, each under that size")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TrajectoryFormatError(f"not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1})",
                                            path=str(p), line=number) from None
            if text.strip():
                yield parse_trajectory_line(text, path=str(p), line=number)


def read_trajectories(path: Path | str) -> list[Trajectory]:
    """Load every episode of a JSONL file; any malformed line fails the whole file."""
    return list(iter_trajectories(path))


def append_line(path: Path | str, line: str) -> None:
    """Append one line to a JSONL file, flushed and fsynced.

    A process killed mid-write can leave a last line without its newline; the next line then starts
    on a line of its own, so only the torn line is unreadable (readers of committed lines skip it).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    with p.open("a+b") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                data = b"\n" + data
        fh.seek(0, os.SEEK_END)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def append_trajectory(path: Path | str, trajectory: Trajectory) -> None:
    """Append one episode as one line (see `append_line`)."""
    append_line(path, trajectory.model_dump_json())


def write_atomic(path: Path | str, data: bytes | str) -> None:
    """Write a whole file durably and atomically: a crash leaves the old file or the new one, never half.

    The bytes go to a temp file created exclusively beside ``path`` (``O_EXCL | O_NOFOLLOW``: it never opens
    or writes through a link; its mode is the umask's, as for any new file), are flushed and fsynced, then
    renamed over ``path`` (a rename replaces the name; it never writes through what stood there). This is
    guimem's one durable-write helper: run specs, snapshots, trajectory files, exports and the index
    cache's entries all commit through it.

    Args:
        path: The file to write; missing parent folders are made.
        data: The whole content (``str`` is written as UTF-8).

    Raises:
        FileConflictError: A file stands where a folder of the path must be.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except (FileExistsError, NotADirectoryError):
        raise FileConflictError("a file stands where a folder of this path must be", path=str(target)) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_trajectories(path: Path | str, trajectories: Iterable[Trajectory]) -> None:
    """Write a whole file atomically (see `write_atomic`)."""
    write_atomic(path, "".join(t.model_dump_json() + "\n" for t in trajectories))
