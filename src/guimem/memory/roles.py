"""Parameters bound by their role in the goal, not by the name the source task's extractor gave them.

A behaviour learned on one task names its values by that task's parameters (``{to}``). Each placeholder
also keeps its *role*: where the goal put its value, the word before it and the word after it ("the
email **by** {by} **and** forward ...": ``by|and``). On another task, a placeholder binds to the parameter
of the same name when there is one, else to the one parameter whose value has the same role in that
task's goal; with none (or several), it stays unbound and the step cannot act (memory never guesses a
value). Only task parameters bind: a quoted goal value has a role but no name another task can fill.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from guimem.memory.generalise import VERBS, task_values
from guimem.types import Action, InjectedItem, Task

_WORD = re.compile(r"[a-z]+")
_FILLER = frozenset({"the", "a", "an", "of", "that", "this", "with", "and", "s"})
MAX_ROLE = 40
MAX_NAME = 64
MAX_ROLES = 64  # what `Behaviour.roles` holds at most


def _whole_word(word: str, goal: str) -> re.Match[str] | None:
    """Where ``word`` first stands in ``goal`` as a whole word (None for an empty word or none)."""
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", goal) if word else None


def goal_roles(task: Task) -> dict[str, str]:
    """Each of the task's values (its parameters and quoted goal substrings) → its role where it first
    stands in the goal as a whole word: the nearest word before it that is not a filler and the word right
    after it (``by|and`` in "the email by Livia and ..."); values the goal does not show have no role."""
    return dict(_read(task).roles)  # a fresh copy: callers may change it


class _GoalReading(NamedTuple):
    roles: dict[str, str]  # never changed once read (`goal_roles` hands out copies)
    shown: frozenset[str]  # `shown_names`
    quoted: frozenset[str]  # the names of the quoted goal values that are not parameters


def _read(task: Task) -> _GoalReading:
    """What the goal says of the task's values. It depends on the goal and the parameters alone, and one recall
    asks it once per candidate skill of the same task, so the last few readings are kept."""
    return _read_goal(task.goal, tuple(task.params.items()))


@functools.lru_cache(maxsize=64)
def _read_goal(goal_text: str, params: tuple[tuple[str, str], ...]) -> _GoalReading:
    task = Task(id="", goal=goal_text, app="", params=dict(params))
    goal = goal_text.casefold()
    roles: dict[str, str] = {}
    shown: set[str] = set()
    values = task_values(task)
    for name, value in values.items():
        found = _whole_word(value.strip().casefold(), goal)
        if found is None:
            continue
        shown.add(name)
        before = [w for w in _WORD.findall(goal[max(0, found.start() - 60):found.start()]) if w not in _FILLER]
        after = _WORD.findall(goal[found.end():found.end() + 30])
        if before:
            roles[name] = f"{before[-1]}|{after[0] if after else ''}"[:MAX_ROLE]
    return _GoalReading(roles, frozenset(shown), frozenset(n for n in values if n not in task.params))


def roles_of(actions: Iterable[Action], task: Task, names: Iterable[str] = ()) -> dict[str, str]:
    """The roles of the placeholders ``actions`` use (and of ``names``), as ``task``'s goal gives them."""
    roles = goal_roles(task)
    used = [n for a in actions for n in a.params()] + list(names)
    found = {n: roles[n] for n in used if n in roles and len(n) <= MAX_NAME}
    return dict(list(found.items())[:MAX_ROLES])


def binding(names: Iterable[str], roles: dict[str, str], task: Task) -> dict[str, str]:
    """Placeholder name → the name of ``task``'s parameter it binds to, one to one: the same name, else the
    one parameter whose value has the placeholder's role in this goal, when no other placeholder and no
    other parameter has that role (names that bind to nothing are left out).

    A placeholder whose value the learning goal showed (it has a role) is a value a goal asks for: where this
    goal shows its values, it binds by name only to one of them. A parameter such a goal leaves out is the
    task's setup (a file's content, not text to type): "type {text}; Save", learned where the goal said the
    text, must not type a document's own content back and save it where the goal asks for a copy under
    another name. (A goal that shows none of its values, such as one given apart from them, binds by name; so does
    a value that is a verb of the lexicon, what the task asks to do whether or not its goal says the word: "Mark
    Taffy's email important." asks for the ``star`` its extractor gives.)"""
    wanted = sorted(set(names))
    out = {n: n for n in wanted if n in task.params}
    shown: dict[str, str] | None = None
    if any(n in roles for n in out):
        shown = goal_roles(task)
        if any(p in shown for p in task.params):
            out = {n: p for n, p in out.items() if n not in roles or n in shown or _asks(task, p)}
    if len(out) == len(wanted):
        return out  # every name is the task's own: no role to read (the common case, on the recall path)
    shown = goal_roles(task) if shown is None else shown
    here = {p: r for p, r in shown.items() if p in task.params and p not in out.values()}
    mine = Counter(roles[n] for n in wanted if n in roles)
    theirs = Counter(here.values())
    for name in wanted:
        role = roles.get(name)
        if name in out or not role or mine[role] != 1 or theirs[role] != 1:
            continue
        out[name] = next(p for p, r in here.items() if r == role)
    return out


def _asks(task: Task, name: str) -> bool:
    """Is ``task``'s parameter ``name`` a verb of the lexicon (`generalise.VERBS`): what the task asks to do?"""
    return task.params[name].strip().casefold() in VERBS


def bound_args(names: Iterable[str], roles: dict[str, str], task: Task) -> dict[str, str]:
    """The task's values for ``names`` (by name, else by role), with the task's own parameters but for the
    names `binding` refused (a placeholder the learning goal showed, named like a value this goal does not)."""
    wanted = set(names)
    bound = binding(wanted, roles, task)
    return {**{k: v for k, v in task.params.items() if k not in wanted or k in bound},
            **{n: task.params[p] for n, p in bound.items()}}


def shown_names(task: Task) -> set[str]:
    """The names of ``task``'s values (its parameters and quoted substrings) that its goal shows as whole words."""
    return set(_read(task).shown)


def unplaced(placed: Iterable[str], task: Task) -> int:
    """How many of the values ``task``'s goal shows (`shown_names`) none of the value names ``placed`` is: what a
    routine placing those would leave undone. Counted by name, so two values that happen to be equal count
    twice wherever they are shown."""
    return len(shown_names(task) - set(placed))


def placed_here(names: Iterable[str], roles: dict[str, str], task: Task) -> set[str]:
    """The names of ``task``'s values that the placeholders ``names`` place: the parameters they bind to (by name,
    else by role, `binding`) and the quoted goal values they name."""
    wanted = set(names)
    return set(binding(wanted, roles, task).values()) | (wanted & _read(task).quoted)


def rebind(item: InjectedItem, task: Task) -> InjectedItem:
    """``item`` with its behaviour's placeholders renamed to ``task``'s parameters they bind to by role
    (a placeholder with the task's own name, or none, is left as it is; the item's text is not rewritten:
    it says what was learned)."""
    behaviour = item.behaviour
    used = {n for a in behaviour.actions for n in a.params()}
    names = {old: new for old, new in binding(used, behaviour.roles, task).items() if old != new}
    if not names:
        return item
    as_placeholders = {old: "{" + new + "}" for old, new in names.items()}  # binding a name to a placeholder
    renamed = behaviour.model_copy(update={"actions": tuple(a.bind(as_placeholders) for a in behaviour.actions),
                                           "roles": {names.get(n, n): r for n, r in behaviour.roles.items()}})
    return item.model_copy(update={"behaviour": renamed})

