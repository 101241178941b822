"""Typed actions, and the errors a failed action turns into (data, not exceptions)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from guimem.types.ui import Selector, fill, placeholders


class ActionKind(StrEnum):
    """Every kind of action an agent can take."""

    TAP = "tap"
    TYPE = "type"
    SCROLL = "scroll"
    KEY = "key"
    OPEN_APP = "open_app"
    WAIT = "wait"
    ANSWER = "answer"
    DONE = "done"
    RUN_SKILL = "run_skill"
    MEMORY = "memory"


class MemoryOp(StrEnum):
    """ConAct's explicit memory actions."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"


UI_KINDS = frozenset({ActionKind.TAP, ActionKind.TYPE, ActionKind.SCROLL, ActionKind.KEY, ActionKind.OPEN_APP})
TARGETED_KINDS = frozenset({ActionKind.TAP, ActionKind.TYPE})


def _kind_rules(schema: dict[str, Any]) -> None:
    """The per-kind requirements `Action._check_fields` enforces, stated in the JSON schema too.

    So a client generating requests from the OpenAPI document (or a model constrained by it) can
    only produce actions the validator accepts.
    """
    def when(kinds: list[str], then: dict[str, Any]) -> dict[str, Any]:
        return {"if": {"properties": {"kind": {"enum": kinds}}, "required": ["kind"]}, "then": then}

    def non_empty(field: str) -> dict[str, Any]:
        return {"required": [field], "properties": {field: {"type": "string", "minLength": 1}}}

    targeted = [k.value for k in sorted(TARGETED_KINDS)]
    schema["allOf"] = [
        when(targeted, {"anyOf": [{"required": ["ref"], "properties": {"ref": {"type": "string"}}},
                                  {"required": ["selector"], "properties": {"selector": {"type": "object"}}}]}),
        when([ActionKind.TYPE.value], {"required": ["text"], "properties": {"text": {"type": "string"}}}),
        when([ActionKind.KEY.value], non_empty("key")),
        when([ActionKind.OPEN_APP.value], non_empty("app")),
        when([ActionKind.RUN_SKILL.value], non_empty("skill")),
        when([ActionKind.SCROLL.value], {"properties": {"direction": {"enum": [None, "up", "down", "left", "right"]}}}),
        when([ActionKind.MEMORY.value], {
            "required": ["op"], "properties": {"op": {"enum": [o.value for o in MemoryOp]}},
            "allOf": [{"if": {"properties": {"op": {"enum": ["update", "delete"]}}}, "then": non_empty("memory_id")},
                      {"if": {"properties": {"op": {"enum": ["add", "update"]}}},
                       "then": {"required": ["text"], "properties": {"text": {"type": "string"}}}}]}),
    ]


class Action(BaseModel):
    """One action. Which fields are required depends on ``kind``.

    A target is named by ``ref`` (valid in the current observation only) or by a portable
    ``selector``; recorded actions carry both so memory can keep the selector.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, json_schema_extra=_kind_rules)

    kind: ActionKind
    ref: str | None = None
    selector: Selector | None = None
    text: str | None = None
    key: str | None = None
    direction: str | None = None
    app: str | None = None
    skill: str | None = None
    args: dict[str, str] = Field(default_factory=dict)
    op: MemoryOp | None = None
    memory_id: str | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _check_fields(self) -> Action:
        problem = _missing_field(self)
        if problem:
            raise ValueError(f"{self.kind.value}: {problem}")
        return self

    @property
    def is_ui(self) -> bool:
        """True when the action changes the screen (memory actions and answers do not)."""
        return self.kind in UI_KINDS or self.kind is ActionKind.RUN_SKILL

    def params(self) -> list[str]:
        """The ``{param}`` names the selector and the text use, in order."""
        names = self.selector.params() if self.selector else []
        return names + (placeholders(self.text) if self.text else [])

    def bind(self, params: dict[str, str]) -> Action:
        """A copy with ``{param}`` placeholders in the selector and text filled."""
        update: dict[str, object] = {}
        if self.selector is not None and (selector := self.selector.bind(params)) is not self.selector:
            update["selector"] = selector
        if self.text is not None and (text := fill(self.text, params)) != self.text:
            update["text"] = text
        return self.model_copy(update=update) if update else self

    def describe(self) -> str:
        """A compact, readable form, e.g. ``type(textbox "Username", "alice")``."""
        target = self.selector.describe() if self.selector else (f"ref={self.ref}" if self.ref else "")
        args: list[str] = [target] if target else []
        if self.kind is ActionKind.TYPE or self.kind is ActionKind.ANSWER:
            args.append(repr(self.text or ""))
        elif self.kind is ActionKind.KEY:
            args.append(self.key or "")
        elif self.kind is ActionKind.SCROLL:
            args.append(self.direction or "down")
        elif self.kind is ActionKind.OPEN_APP:
            args.append(self.app or "")
        elif self.kind is ActionKind.RUN_SKILL:
            args.append(self.skill or "")
            args.extend(f"{k}={v!r}" for k, v in sorted(self.args.items()))
        elif self.kind is ActionKind.MEMORY:
            args.extend([(self.op or MemoryOp.ADD).value, self.memory_id or "", repr(self.text or "")])
        return f"{self.kind.value}({', '.join(a for a in args if a)})"


def _memory_problem(action: Action) -> str | None:
    if action.op is None:
        return "needs op (add, update or delete)"
    if action.op is not MemoryOp.ADD and not action.memory_id:
        return f"{action.op.value} needs memory_id"
    if action.op is not MemoryOp.DELETE and action.text is None:
        return f"{action.op.value} needs text (the complete value to keep)"
    return None


_REQUIRED: dict[ActionKind, tuple[str, str]] = {
    ActionKind.TYPE: ("text", "needs text"),
    ActionKind.KEY: ("key", "needs a key"),
    ActionKind.OPEN_APP: ("app", "needs an app"),
    ActionKind.RUN_SKILL: ("skill", "needs a skill name"),
}


def _missing_field(action: Action) -> str | None:
    kind = action.kind
    if kind in TARGETED_KINDS and action.ref is None and action.selector is None:
        return "needs a target (ref or selector)"
    if kind in _REQUIRED:
        attr, problem = _REQUIRED[kind]
        value = getattr(action, attr)
        if value is None or (attr != "text" and not value):
            return problem
    if kind is ActionKind.SCROLL and action.direction not in (None, "up", "down", "left", "right"):
        return f"direction must be up, down, left or right, not {action.direction!r}"
    if kind is ActionKind.MEMORY:
        return _memory_problem(action)
    return None


class ActionErrorCode(StrEnum):
    """Why an action failed."""

    NO_SUCH_ELEMENT = "no_such_element"
    AMBIGUOUS_TARGET = "ambiguous_target"
    NOT_EDITABLE = "not_editable"
    INVALID_ACTION = "invalid_action"
    UNSUPPORTED = "unsupported"
    ENV_REJECTED = "env_rejected"
    MODEL_ERROR = "model_error"
    PARSE_ERROR = "parse_error"
    SKILL_FAILED = "skill_failed"
    MEMORY_ERROR = "memory_error"


class ActionError(BaseModel):
    """A failed action, shown to the agent at its next step."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    code: ActionErrorCode
    message: str
    action: str | None = None
