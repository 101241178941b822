from __future__ import annotations

import pytest
from pydantic import ValidationError

from guimem.types import Action, ActionKind, MemoryOp, Role, Selector


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "tap"}, "needs a target"),
    ({"kind": "type", "ref": "1"}, "needs text"),
    ({"kind": "key"}, "needs a key"),
    ({"kind": "scroll", "direction": "sideways"}, "direction must be"),
    ({"kind": "run_skill"}, "needs a skill name"),
    ({"kind": "memory", "op": "update", "text": "x"}, "needs memory_id"),
    ({"kind": "memory", "op": "add"}, "needs text"),
    ({"kind": "teleport"}, "Input should be"),
])
def test_invalid_actions_are_rejected_with_the_reason(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        Action(**kwargs)


def test_bind_fills_selector_and_text_placeholders():
    a = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="{field}"), text="{value}")
    bound = a.bind({"field": "Username", "value": "alice"})
    assert bound.selector.label == "Username" and bound.text == "alice"


def test_describe_is_readable():
    a = Action(kind=ActionKind.TYPE, selector=Selector(role=Role.TEXTBOX, label="Username"), text="alice")
    assert a.describe() == "type(textbox \"Username\", 'alice')"
    m = Action(kind=ActionKind.MEMORY, op=MemoryOp.ADD, text="order 123")
    assert m.describe().startswith("memory(add") and not m.is_ui
