"""Parameters bound by their role in the goal, not by the name the source task's extractor gave them.

A behaviour learned on one task names its values by that task's parameters (``{to}``). Each placeholder
also keeps its *role*: the word the goal put before its value ("forward that email **to** {to}", "reply
with the **text** {message}"). On another task, a placeholder binds to the parameter of the same name
when there is one, else to the one parameter whose value has the same role in that task's goal; with
none (or several), it stays unbound and the step cannot act (memory never guesses a value).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from guimem.memory.generalise import task_values
from guimem.types import Action, Behaviour, InjectedItem, Task

_WORD = re.compile(r"[a-z]+")
_FILLER = frozenset({"the", "a", "an", "of", "that", "this", "with", "and", "s"})


def goal_roles(task: Task) -> dict[str, str]:
    """Each of the task's values (its parameters and quoted goal substrings) → its role: the nearest
    word before its first place in the goal that is not a filler ("by", "to", "text"); values the goal
    does not show have no role."""
    goal = task.goal.casefold()
    out: dict[str, str] = {}
    for name, value in task_values(task).items():
        at = goal.find(value.strip().casefold()) if value.strip() else -1
        if at < 0:
            continue
        before = [w for w in _WORD.findall(goal[max(0, at - 60):at]) if w not in _FILLER]
        if before:
            out[name] = before[-1]
    return out


def roles_of(actions: Iterable[Action], task: Task) -> dict[str, str]:
    """The roles of the placeholders ``actions`` use, as ``task``'s goal gives them."""
    roles = goal_roles(task)
    return {n: roles[n] for a in actions for n in a.params() if n in roles}


def binding(names: Iterable[str], roles: dict[str, str], task: Task) -> dict[str, str]:
    """Placeholder name → the name of ``task``'s parameter it binds to: the same name, else the one
    parameter whose value has the placeholder's role in this goal (names that bind to nothing are left out)."""
    here = goal_roles(task)
    out: dict[str, str] = {}
    for name in names:
        if name in task.params:
            out[name] = name
            continue
        role = roles.get(name)
        same = [p for p, r in here.items() if role and r == role and p in task.params]
        if len(same) == 1:
            out[name] = same[0]
    return out


def bound_args(names: Iterable[str], roles: dict[str, str], task: Task) -> dict[str, str]:
    """The task's values for ``names`` (by name, else by role), with the task's own parameters."""
    return {**task.params, **{n: task.params[p] for n, p in binding(names, roles, task).items()}}


def _renamed(action: Action, names: dict[str, str]) -> Action:
    def swap(text: str) -> str:
        for old, new in names.items():
            text = text.replace("{" + old + "}", "{" + new + "}")
        return text

    update: dict[str, object] = {}
    if action.selector is not None:
        sel = action.selector
        update["selector"] = sel.model_copy(update={"text": swap(sel.text), "label": swap(sel.label),
                                                    "resource_id": swap(sel.resource_id), "near": swap(sel.near)})
    if action.text is not None:
        update["text"] = swap(action.text)
    return action.model_copy(update=update)


def rebind(item: InjectedItem, task: Task) -> InjectedItem:
    """``item`` with its behaviour's placeholders renamed to ``task``'s parameters they bind to by role
    (a placeholder with the task's own name, or none, is left as it is)."""
    behaviour = item.behaviour
    used = {n for a in behaviour.actions for n in a.params()}
    names = {old: new for old, new in binding(used, behaviour.roles, task).items() if old != new}
    if not names or any(p in names.values() and p not in names for p in used):
        return item  # nothing to rename, or a rename would collide with a name the behaviour already uses
    renamed = Behaviour(actions=tuple(_renamed(a, names) for a in behaviour.actions), avoid=behaviour.avoid,
                        roles={names.get(n, n): r for n, r in behaviour.roles.items()})
    return item.model_copy(update={"behaviour": renamed})

