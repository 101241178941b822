"""The counts of a stored memory by kind and status: the one count that every surface shows.

The CLI (``guimem memory stats``, ``guimem memory memories``), the HTTP API and the inspector (through
`MemoryService.stats`) and the report all count through `counts`, so they cannot disagree. A kind is the
stored record's kind (``node``, ``edge``, ``skill``, ``knowledge``: `guimem.types.ItemKind`); what a
knowledge item is inside (a procedure, a warning, a stack's edge or skill) is its detail, not its count.

Every surface also reads one stored item through `describe`: what it is (``what``: a stack's skill is a
skill, wherever it is stored), its one-line summary with page text quoted as data, and its provenance. The
service's item list, the inspector, the CLI and the report use it, so they cannot call one item two things.
"""

from __future__ import annotations

import json
from contextlib import suppress

from pydantic import BaseModel, ValidationError

from guimem.memory.hostile import page_spans, quote_spans
from guimem.memory.subgoals import effect_lines
from guimem.storage import Record, Store
from guimem.types import Behaviour, Origin

SUMMARY_KEYS = ("content", "text", "description", "signature", "name")
"""Where a stored body keeps its one-line summary, first found first."""
INNER_KINDS = frozenset({"procedure", "warning", "edge", "skill"})
"""What a knowledge record can be inside (`guimem.memory.steer.items.KnowledgeItem.kind`)."""


def count_key(kind: str, status: str) -> str:
    """The key of a count: ``kind:status`` (``knowledge:trial``)."""
    return f"{kind}:{status}"


def counts(store: Store, namespace: str) -> dict[str, int]:
    """The current items of the memory in ``namespace`` by ``kind:status``, sorted by key: one grouped count
    in the store, no item read."""
    by = store.stats(namespace).by_kind_status
    return {count_key(kind, status): n for (kind, status), n in sorted(by.items())}


class ItemDescription(BaseModel):
    """One stored item as every surface shows it."""

    id: str
    kind: str
    """The stored record's kind (``node``, ``edge``, ``skill``, ``knowledge``): what it is counted as."""
    what: str
    """What it is: ``node``, ``edge``, ``skill``, ``procedure`` or ``warning`` (a knowledge item's inner kind)."""
    status: str
    version: int
    summary: str
    """Its first line, page text quoted as data."""
    manual: bool = False
    origin: str = Origin.ACTION.value
    imported: bool = False
    page: list[str] = []
    quarantine: str = ""


def _body(raw: str) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def what_of(kind: str, body: dict[str, object]) -> str:
    """What a record of ``kind`` with ``body`` is: a knowledge item's inner kind, else the record's kind."""
    inner = body.get("kind")
    return inner if kind == "knowledge" and isinstance(inner, str) and inner in INNER_KINDS else kind


def summary_of(kind: str, body: dict[str, object]) -> str:
    """A stored body's first line (whole: views shorten at word boundaries); the kind when it has none."""
    for key in SUMMARY_KEYS:
        value = body.get(key)
        if isinstance(value, str) and value:
            return value.splitlines()[0]
    return kind


def provenance(body: object) -> dict[str, object]:
    """Who wrote a stored item's words and the page text it carries (from its body, bounded)."""
    if not isinstance(body, dict):
        return {}
    page = [s for s in body.get("page", []) if isinstance(s, str)] if isinstance(body.get("page"), list) else []
    with suppress(ValidationError):
        page += page_spans(Behaviour.model_validate(body.get("behaviour") or {}))
    if isinstance(body.get("effect"), str):
        page += effect_lines(body["effect"])
    origin = body.get("origin")
    return {"origin": origin if origin in {o.value for o in Origin} else Origin.ACTION.value,
            "imported": body.get("imported") is True, "page": list(dict.fromkeys(page))[:50],
            "quarantine": str(body.get("quarantine") or "")[:500]}


def describe(rec: Record) -> ItemDescription:
    """One stored record as the service, the inspector, the CLI and the report show it."""
    body = _body(rec.body)
    prov = provenance(body)
    page = prov.get("page")
    summary = quote_spans(summary_of(rec.kind, body), page if isinstance(page, list) else [])  # page text as data
    return ItemDescription(id=rec.id, kind=rec.kind, what=what_of(rec.kind, body), status=rec.status,
                           version=rec.version, summary=summary, manual=body.get("manual") is True,
                           **prov)
