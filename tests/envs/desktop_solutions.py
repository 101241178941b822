"""Scripted correct solutions of the desktop tasks (what a person would do), for the checker tests."""

from __future__ import annotations

import time

from guimem.envs.base import Env
from guimem.types import Action, ActionKind, Observation, Role, UIElement


def find(obs: Observation, text: str, role: Role | None = None) -> UIElement:
    """The element whose text (stripped of a trailing ellipsis) is ``text``."""
    for el in obs.elements:
        name = el.text.strip().removesuffix("...").removesuffix("…")
        if name == text and (role is None or el.role is role):
            return el
    raise AssertionError(f"no {role or 'element'} {text!r} on {obs.location!r}: "
                         f"{[(e.role.value, e.text) for e in obs.elements]}")


def wait_for(env: Env, obs: Observation, text: str, role: Role | None = None, tries: int = 20) -> tuple[Observation,
                                                                                                      UIElement]:
    """Wait (WAIT actions) until ``text`` is on the screen."""
    for _ in range(tries):
        try:
            return obs, find(obs, text, role)
        except AssertionError:
            obs = env.step(Action(kind=ActionKind.WAIT)).observation
    return obs, find(obs, text, role)


def tap(env: Env, obs: Observation, text: str, role: Role | None = None) -> Observation:
    """Tap the element named ``text`` (waiting for it to appear)."""
    obs, el = wait_for(env, obs, text, role)
    result = env.step(Action(kind=ActionKind.TAP, ref=el.ref))
    assert result.error is None, result.error
    return result.observation


def type_into(env: Env, obs: Observation, el: UIElement, text: str) -> Observation:
    """Type ``text`` into ``el``."""
    result = env.step(Action(kind=ActionKind.TYPE, ref=el.ref, text=text))
    assert result.error is None, result.error
    return result.observation


def editor(obs: Observation) -> UIElement:
    """mousepad's text view."""
    return next(e for e in obs.elements if e.role is Role.TEXTBOX and e.container.endswith("Mousepad"))


def calculate(env: Env, obs: Observation, a: str, op: str, b: str) -> Observation:
    """Press the digits of ``a``, the operator, the digits of ``b`` and ``=``."""
    for key in [*a, op, *b, "="]:
        obs = tap(env, obs, key, Role.BUTTON)
    return obs


def save_as(env: Env, obs: Observation, folder: str, name: str) -> Observation:
    """File → Save As…, open ``folder`` (empty: stay in the home folder), name the file, Save."""
    obs = tap(env, obs, "File", Role.MENUITEM)
    obs = tap(env, obs, "Save As", Role.MENUITEM)
    obs, _ = wait_for(env, obs, "Save", Role.BUTTON)
    if folder:
        obs = tap(env, obs, folder, Role.LISTITEM)
        for _ in range(20):
            if any(e.text == folder and e.role is Role.BUTTON for e in obs.elements):
                break
            obs = env.step(Action(kind=ActionKind.WAIT)).observation
    entry = next(e for e in obs.elements if e.role is Role.TEXTBOX)
    obs = type_into(env, obs, entry, name)
    time.sleep(0.3)
    return tap(env, obs, "Save", Role.BUTTON)


def solve(env: Env, obs: Observation) -> Observation:
    """Solve the current task the way a person would."""
    task, p = env.task, env.task.params
    if task.id == "calc-add":
        return calculate(env, obs, p["a"], "+", p["b"])
    if task.id == "calc-multiply":
        return calculate(env, obs, p["a"], "*", p["b"])
    if task.id == "calc-subtract":
        return calculate(env, obs, p["a"], "-", p["b"])
    if task.id == "mousepad-edit-save":
        obs = type_into(env, obs, editor(obs), p["text"])
        obs = tap(env, obs, "File", Role.MENUITEM)
        return tap(env, obs, "Save", Role.MENUITEM)
    if task.id == "mousepad-quit-save":
        obs = type_into(env, obs, editor(obs), p["text"])
        obs = tap(env, obs, "File", Role.MENUITEM)
        obs = tap(env, obs, "Quit", Role.MENUITEM)
        return tap(env, obs, "Save", Role.BUTTON)
    if task.id in ("mousepad-save-as", "mousepad-save-home"):
        obs = type_into(env, obs, editor(obs), p["text"])
        return save_as(env, obs, p.get("folder", ""), p["name"])
    if task.id == "mousepad-save-copy":
        return save_as(env, obs, p["folder"], p["name"])
    raise AssertionError(f"no scripted solution for {task.id}")
