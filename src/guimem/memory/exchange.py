"""Export and import files of a memory: the JSONL format, how a memory is written to it and read back, and
where an export may be written. The format belongs to the memory layer (the service, the CLI and MCP call
`export_lines` and `write_import`; none of them builds a line by hand).

An export is written only as a ``.jsonl`` file; with a data directory, only inside its own
``exports/`` folder (never into run folders). It never writes through a symbolic link, never opens
or replaces a device, FIFO or socket, and replaces an existing file only when that file is itself a
guimem export. Every folder on the way, below the data directory, must be a real folder, not a link.
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from guimem.errors import ConfigError, DataError, FileConflictError, NotFoundError
from guimem.memory.hostile import screen_item
from guimem.memory.keys import RoundClock
from guimem.memory.steer.items import Evidence, KnowledgeItem
from guimem.storage import Record, Store
from guimem.storage.base import EventDraft
from guimem.types import ItemKind
from guimem.types.files import read_regular

EXPORT_VERSION = 2
"""Version 2 names the header's count of round boundaries ``boundaries_applied`` (version 1: ``round``); a
version 1 export still imports."""
READABLE_EXPORT_VERSIONS = (1, EXPORT_VERSION)
EXPORTS = "exports"
SUFFIX = ".jsonl"
MAX_EXPORT_BYTES = 2_000_000_000


def export_target(root: Path | None, path: Path) -> Path:
    """Where an export named ``path`` is written (see the module docstring), checked before anything is written.

    With a data directory ``root``, ``path`` is relative to ``root/exports/`` (a leading ``exports/`` may be
    given), or absolute inside it; without one (the CLI), it is the path as given.

    Raises:
        ConfigError: Not a ``.jsonl`` name, or outside the exports folder.
        FileConflictError: A link, device, FIFO, socket or folder, or a file that is not an export, stands there.
    """
    if path.suffix != SUFFIX or path.name.startswith("."):
        raise ConfigError(f"an export is written as a {SUFFIX} file",
                          suggestion=f"name it so: {path.with_suffix(SUFFIX).name if path.stem else 'memory.jsonl'}")
    if root is None:
        target = path.absolute()
        _check_replaceable(target)
        return target
    folder = root.resolve() / EXPORTS
    parts = _inside(folder, path)
    target = folder.joinpath(*parts)
    _check_folders(root.resolve(), target.parent)
    _check_replaceable(target)
    return target


def _inside(folder: Path, path: Path) -> tuple[str, ...]:
    if path.is_absolute():
        if not path.is_relative_to(folder):
            raise ConfigError(f"an export path outside the data directory's {EXPORTS}/ folder is refused",
                              suggestion=f"give a path relative to it, e.g. {EXPORTS}/steer.jsonl")
        path = path.relative_to(folder)
    parts = path.parts[1:] if path.parts[:1] == (EXPORTS,) else path.parts
    if not parts or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise ConfigError(f"an export path names a file inside the data directory's {EXPORTS}/ folder",
                          suggestion="e.g. memory.jsonl or exports/memory.jsonl")
    return parts


def _check_folders(root: Path, folder: Path) -> None:
    """Every folder from ``root`` down to ``folder`` is a real folder (not a link) or does not exist yet."""
    here = root
    for part in folder.relative_to(root).parts:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            raise FileConflictError("a link or a file stands where a folder of the export must be",
                                    path=str(folder.relative_to(root)))


def _check_replaceable(target: Path) -> None:
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise FileConflictError("is a symbolic link: an export never writes through a link", path=target.name)
    if stat.S_ISDIR(mode):
        raise FileConflictError("is a folder, not a file", path=target.name, suggestion="name a .jsonl file")
    if not stat.S_ISREG(mode):
        raise FileConflictError("is a device, FIFO or socket: an export replaces only a previous export",
                                path=target.name)
    if not is_export(target):
        raise FileConflictError("exists and is not a guimem export: an export never replaces other files",
                                path=target.name, suggestion="choose a new file name")


def is_export(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) whose first line is a guimem export header."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as fh:
        first = fh.readline(1 << 16)
    try:
        return isinstance(_LINE.validate_json(first), ExportHeader)
    except ValidationError:
        return False


def export_header(store: Store, namespace: str, method_name: str, embedder: str) -> ExportHeader:
    """The header an export of the memory in ``namespace`` starts with (also what an import must match)."""
    return ExportHeader(type="header", version=EXPORT_VERSION, method=method_name, namespace=namespace,
                        embedder=embedder, boundaries_applied=RoundClock(store, namespace).applied())


def export_lines(store: Store, header: ExportHeader) -> tuple[list[str], int, int]:
    """Every version of every item of ``header.namespace`` and every event, as the export's JSONL lines
    (header first); with the count of records and of events."""
    namespace = header.namespace
    records = [ExportRecord(type="record", id=v.id, kind=v.kind, status=v.status, version=v.version,
                            body=json.loads(v.body), vector=v.vector.hex() if v.vector else None)
               for rec in store.query(namespace) for v in store.history(rec.id)]
    events = [ExportEvent(type="event", event=e.type, item_id=e.item_id,
                          payload=EventPayload.model_validate_json(e.payload or "{}"))
              for e in store.events(namespace=namespace)]
    lines = [line.model_dump_json(exclude_unset=isinstance(line, ExportEvent)) for line in (header, *records, *events)]
    return lines, len(records), len(events)


def write_import(store: Store, namespace: str, source: Path, header: ExportHeader, records: list[ExportRecord],
                 events: list[ExportEvent], untrusted: bool = True) -> tuple[int, int]:
    """Write what the memory does not already hold of a parsed export (inside the caller's transaction);
    returns the versions and events written. With ``untrusted``, each knowledge item's history ends in one
    more version: marked imported, back to candidate (or quarantined, if it carries page text addressing
    the agent), so it earns admission here whatever status it was exported with.

    Raises:
        DataError: The export holds items (or events of items) of another namespace of this store.
    """
    _check_ids(store, namespace, source, records, events)
    items = by_item(records)
    if untrusted:
        items = {item_id: [*versions, *untrust(versions[-1])] for item_id, versions in items.items()}
    written = sum(_import_versions(store, namespace, versions) for versions in items.values())
    have = Counter(event_key(e.type, e.item_id, json.loads(e.payload or "{}"))
                   for e in store.events(namespace=namespace))
    logged = 0
    for e in events:
        payload = e.payload.model_dump(exclude_unset=True)
        key = event_key(e.event, e.item_id, payload)
        if have[key] > 0:
            have[key] -= 1
            continue
        store.append_event(EventDraft(e.event, e.item_id, namespace, json.dumps(payload)))
        logged += 1
    _import_round(store, namespace, header.boundaries_applied)
    return written, logged


def _import_round(store: Store, namespace: str, exported: int | None) -> None:
    """Keep the export's round counter when it is ahead of this memory's."""
    RoundClock(store, namespace).carry(exported)


def _check_ids(store: Store, namespace: str, source: Path, records: list[ExportRecord],
               events: list[ExportEvent]) -> None:
    for item_id in dict.fromkeys([r.id for r in records] + [e.item_id for e in events if e.item_id]):
        try:
            owner = store.get(item_id).namespace
        except NotFoundError:
            continue
        if owner != namespace:
            raise DataError("the export holds items of another namespace of this store", path=source.name,
                            suggestion="import it into the memory it was exported from, or into another store")


def _import_versions(store: Store, namespace: str, versions: list[ExportRecord]) -> int:
    """Write the versions of one item that its history does not already hold, in order."""
    try:
        history = store.history(versions[0].id)
    except NotFoundError:
        history = []
    same = 0
    for old, new in zip(history, versions, strict=False):
        if (old.kind, old.status, json.loads(old.body), old.vector) != (new.kind, new.status, new.body,
                                                                         vector_bytes(new.vector)):
            break
        same += 1
    for r in versions[same:]:
        store.put(Record(r.id, r.kind, namespace, r.status, json.dumps(r.body), vector_bytes(r.vector)))
    return len(versions) - same


TRUSTED_STATUSES = frozenset({"admitted", "trial"})


def untrust(head: ExportRecord) -> list[ExportRecord]:
    """The version an imported item starts from here (none when it needs no change). A knowledge item: imported,
    not manual, as a candidate — or quarantined with the reason when it carries hostile text (its whole
    wording is screened: an export's words are not guimem's own)."""
    if head.kind in (ItemKind.EDGE.value, ItemKind.SKILL.value):
        return _untrust_action(head)
    if head.kind != ItemKind.KNOWLEDGE.value or head.status in ("rejected", "retired", "quarantined"):
        return []
    try:
        item = KnowledgeItem.model_validate(head.body)
    except ValidationError:
        return []  # the memory's own load refuses it, with the reason (`MemoryService._reopen`)
    found = screen_item(item.content, item.behaviour, page=item.page, written=True)
    status = "quarantined" if found is not None else "candidate" if head.status in TRUSTED_STATUSES else head.status
    update: dict[str, object] = {"imported": True, "manual": False, "evidence": Evidence()}
    if found is not None:
        update["quarantine"] = str(found)
    body = json.loads(item.model_copy(update=update).model_dump_json())
    if status == head.status and body == head.body:
        return []
    return [head.model_copy(update={"status": status, "body": body})]


def _untrust_action(head: ExportRecord) -> list[ExportRecord]:
    """A graph edge or a skill as it starts here: marked imported, so that recall says so and screens its whole
    wording as an import's (not guimem's own template over what an agent did); a skill verified elsewhere is
    unverified here (an export's status is a claim, not a replay this memory saw)."""
    body = {**head.body, "imported": True}
    status = "unverified" if head.kind == ItemKind.SKILL.value and head.status == "verified" else head.status
    if status == head.status and body == head.body:
        return []
    return [head.model_copy(update={"status": status, "body": body})]


def vector_bytes(hex_text: str | None) -> bytes | None:
    return bytes.fromhex(hex_text) if hex_text else None


def event_key(kind: str, item_id: str | None, payload: dict[str, object]) -> tuple[str, str | None, str]:
    return (kind, item_id, json.dumps(payload, sort_keys=True))


def by_item(records: list[ExportRecord]) -> dict[str, list[ExportRecord]]:
    out: dict[str, list[ExportRecord]] = {}
    for r in records:
        out.setdefault(r.id, []).append(r)
    return {k: sorted(v, key=lambda r: r.version) for k, v in out.items()}


NAME = r"^[a-z][a-z_]{0,39}$"
ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"


class ExportRecord(BaseModel):
    """One item version in an export."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["record"]
    id: str = Field(pattern=ID)
    kind: str = Field(pattern=NAME)
    status: str = Field(pattern=NAME)
    version: int = Field(default=0, ge=0)
    body: dict[str, object]
    vector: str | None = Field(default=None, pattern=r"^([0-9a-f]{8})*$", max_length=1 << 20)

    @field_validator("vector")
    @classmethod
    def _finite(cls, value: str | None) -> str | None:
        """Float32 numbers that are all finite: one NaN would make every recall's scores NaN."""
        if value and not np.isfinite(np.frombuffer(bytes.fromhex(value), dtype="<f4")).all():
            raise ValueError("the vector holds a number that is not finite (NaN or infinity)")
        return value


class EventPayload(BaseModel):
    """An event's details: the evidence fields every reader relies on are typed; others are kept as they are."""

    model_config = ConfigDict(extra="allow")

    round: int | None = Field(default=None, ge=0)
    trials: int | None = Field(default=None, ge=0)
    controls: int | None = Field(default=None, ge=0)
    difference: float | None = Field(default=None, allow_inf_nan=False)
    effective_uses: int | None = Field(default=None, ge=0)
    harms: int | None = Field(default=None, ge=0)
    held_back: list[str] | None = None
    reason: str | None = None


class ExportEvent(BaseModel):
    """One event in an export."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["event"]
    event: str = Field(pattern=NAME)
    item_id: str | None = Field(default=None, pattern=ID)
    payload: EventPayload = Field(default_factory=EventPayload)


MAX_BOUNDARIES = 1_000_000
"""More round boundaries than any memory passes (one a round): a header claiming more is not an export's."""


class ExportHeader(BaseModel):
    """The first line of an export."""

    type: Literal["header"]
    version: int
    embedder: str
    method: str = ""
    namespace: str = ""
    boundaries_applied: int | None = Field(default=None, ge=0, le=MAX_BOUNDARIES)
    """A count: the round boundaries the exported memory's admission lifecycle had passed."""

    @model_validator(mode="before")
    @classmethod
    def _from_version_1(cls, data: object) -> object:
        """A version 1 header named that count ``round``."""
        if isinstance(data, dict) and data.get("version") == 1 and "round" in data:
            old = dict(data)
            old["boundaries_applied"] = old.pop("round")
            return old
        return data


ExportLine = Annotated[ExportHeader | ExportRecord | ExportEvent, Field(discriminator="type")]
_LINE: TypeAdapter[ExportHeader | ExportRecord | ExportEvent] = TypeAdapter(ExportLine)


def _read_text(path: Path) -> str:
    try:
        return read_regular(path, MAX_EXPORT_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 text (byte offset {exc.start})", path=path.name) from None


def _check_header(header: ExportHeader, expected: ExportHeader, path: Path, line: int) -> None:
    if header.version not in READABLE_EXPORT_VERSIONS:
        raise DataError(f"export version {header.version} is not supported", path=path.name, line=line,
                        field="version")
    if header.embedder != expected.embedder:
        raise DataError(f"exported with embedder {header.embedder!r}, this memory uses {expected.embedder!r}",
                        path=path.name, line=line, field="embedder")
    if header.method and header.method != expected.method:
        raise DataError(f"an export of a {header.method} memory cannot be imported into a {expected.method} memory",
                        path=path.name, line=line, field="method",
                        suggestion=f"import it with --method {header.method} (or into a {header.method} service)")


def parse_export(path: Path, expected: ExportHeader | None
                 ) -> tuple[ExportHeader, list[ExportRecord], list[ExportEvent]]:
    """An export file, validated whole (``expected``: this memory's method and embedder; None: each line alone,
    as a command checks a file before it opens a store for it).

    Raises:
        DataError: A line that is not valid (its number and field named), or another memory's export.
    """
    header: ExportHeader | None = None
    records: list[ExportRecord] = []
    events: list[ExportEvent] = []
    # lines end at "\n" alone: page text inside a JSON string may hold U+2028, U+0085 or a form feed, which
    # str.splitlines would also break at
    for number, line in enumerate(_read_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            parsed = _LINE.validate_json(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or None
            raise DataError(first["msg"], path=path.name, line=number, field=field,
                            suggestion="import a file `guimem memory export` wrote: a header line, then one JSON "
                                       "object per record or event") from None
        if isinstance(parsed, ExportHeader):
            if expected is not None:
                _check_header(parsed, expected, path, number)
            header = parsed
        elif isinstance(parsed, ExportRecord):
            records.append(parsed)
        else:
            events.append(parsed)
    if header is None:
        raise DataError("no header line: not a guimem export", path=path.name, line=1)
    return header, records, events
