"""Steps whose effect the rest of a path never used: left out of the routines induced from it.

An explorer's successful episode holds detours that loop erasure (`generalise.direct_path`) cannot see,
because the screen never comes back to where it was: it opens one menu on the way to another, taps a
button while a menu is open (the menu takes the click), types a value and then types another into the same
field. A routine that keeps such a step replays it wherever it runs, and what the step shows can lead an
agent astray. Only what the recorded screens prove is cut; verification by replay (`skills.verify`) then
judges the routine that is left.
"""

from __future__ import annotations

from collections.abc import Sequence

from guimem.memory.generalise import Performed
from guimem.types import ActionKind, Observation, Role, UIElement

Key = tuple[str, str]
"""An element as a step names it: role and name."""


def _key(el: UIElement) -> Key:
    return el.role.value, el.label or el.text or el.resource_id


def _targets(p: Performed) -> set[Key]:
    """What a performed action aimed at: the element its ref named on the screen before it (when that screen
    is its own) and the element its selector names."""
    keys: set[Key] = set()
    el = p.before.element(p.action.ref) if p.action.ref else None
    if el is not None:
        keys.add(_key(el))
    sel = p.action.selector
    if sel is not None and sel.role is not None:
        keys.add((sel.role.value, sel.label or sel.text or sel.resource_id))
    return keys


def _states(obs: Observation) -> dict[Key, list[tuple[str, str, bool | None, bool]]]:
    out: dict[Key, list[tuple[str, str, bool | None, bool]]] = {}
    for el in obs.elements:
        out.setdefault(_key(el), []).append((el.value or "", el.text, el.checked, el.enabled))
    return {k: sorted(v, key=repr) for k, v in out.items()}


def _passive_taps(performed: Sequence[Performed]) -> dict[int, tuple[frozenset[Key], frozenset[Key]]]:
    """Taps that changed nothing already on the screen: each made on its own screen (not inside a skill run,
    whose screens are the whole run's), leaving the location, and the value, text, box and enabled state of
    every element that stayed, as they were, and taking away nothing but menu items. By position: what
    each showed and what it took away. The last step is never one (the screen after it is the episode's end)."""
    out: dict[int, tuple[frozenset[Key], frozenset[Key]]] = {}
    for i, p in enumerate(performed[:-1]):
        own = (i == 0 or performed[i - 1].after is p.before) and performed[i + 1].before is p.after
        if not own or p.failed or p.action.kind is not ActionKind.TAP or p.before.location != p.after.location:
            continue
        before, after = _states(p.before), _states(p.after)
        if any(before[k] != after[k] for k in before.keys() & after.keys()):
            continue
        gone = frozenset(before.keys() - after.keys())
        if all(role == Role.MENUITEM.value for role, _ in gone):
            out[i] = (frozenset(after.keys() - before.keys()), gone)
    return out


def unused_steps(performed: Sequence[Performed]) -> set[int]:
    """The positions of steps a routine can leave out, because nothing after them used what they did:

    - **an unused opening**: a passive tap (`_passive_taps`) that showed elements no later step kept here
      targets, and all of which were gone once the next kept step was done, on the screen it stayed on (a menu
      opened on the way to another; what stays, an added row or an expanded section, is never cut);
    - **a swallowed tap**: a passive tap that showed nothing and only closed what unused openings showed
      (a click the open menu took);
    - **an overwritten entry**: a ``type`` whose field, still holding its text, the next ``type`` with the
      same selector replaced, with nothing between them but cut steps and taps that only opened menus.

    Cutting one step can leave another unused (the menu whose only used item was the cut one): repeated until
    nothing changes."""
    taps = _passive_taps(performed)
    targets = [_targets(p) for p in performed]
    menus = {i for i, (shown, _) in taps.items() if shown and all(r == Role.MENUITEM.value for r, _ in shown)}
    out: set[int] = set()
    while True:
        found = _unused_taps(performed, taps, targets, out)
        found |= _overwritten(performed, found | menus)
        if found == out:
            return out
        out = found


def _unused_taps(performed: Sequence[Performed], taps: dict[int, tuple[frozenset[Key], frozenset[Key]]],
                 targets: Sequence[set[Key]], out: set[int]) -> set[int]:
    """The unused openings and swallowed taps, given the steps ``out`` already left out."""
    out = set(out)
    opened: set[Key] = set()  # what the openings cut so far showed
    for i, (shown, gone) in sorted(taps.items()):
        if i in out:
            opened |= shown
            continue
        later = [j for j in range(i + 1, len(performed)) if j not in out]  # never empty: the last step stays
        if shown:
            cut = _closed(performed, later[0], shown) and not any(targets[j] & shown for j in later)
        else:
            cut = bool(gone) and gone <= opened
        if cut:
            out.add(i)
            opened |= shown
    return out


def _closed(performed: Sequence[Performed], k: int, shown: frozenset[Key]) -> bool:
    """Was ``shown`` gone once step ``k`` was done, without ``k`` leaving its screen? Never said of the last
    step: the screen after it is the episode's end (a page that resets), which proves nothing."""
    step = performed[k]
    return k < len(performed) - 1 and step.after.location == step.before.location and \
        shown.isdisjoint(_states(step.after))


def _overwritten(performed: Sequence[Performed], between: set[int]) -> set[int]:
    """The entries the next entry with the same selector replaced, with only steps of ``between`` in between."""
    out: set[int] = set()
    for i, p in enumerate(performed[:-1]):
        if p.action.kind is not ActionKind.TYPE or p.action.selector is None or p.failed:
            continue
        for j in range(i + 1, len(performed)):
            q = performed[j]
            if q.action.kind is ActionKind.TYPE and q.action.selector == p.action.selector:
                field = q.before.element(q.action.ref) if q.action.ref else None
                if not q.failed and field is not None and field.value == p.action.text:
                    out.add(i)
                break
            if j not in between:
                break
    return out
