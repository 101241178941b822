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
    """The text editor's text view (mousepad's or gedit's)."""
    return next(e for e in obs.elements if e.role is Role.TEXTBOX and e.container.endswith(("Mousepad", "gedit")))


def main_menu(env: Env, obs: Observation) -> Observation:
    """Open gedit's main menu (the rightmost "Menu" button of its header bar)."""
    obs, _ = wait_for(env, obs, "Menu", Role.BUTTON)
    menu = max((e for e in obs.elements if e.text == "Menu" and e.role is Role.BUTTON), key=lambda e: e.bounds.x)
    result = env.step(Action(kind=ActionKind.TAP, ref=menu.ref))
    assert result.error is None, result.error
    return result.observation


def calculate(env: Env, obs: Observation, a: str, op: str, b: str) -> Observation:
    """Press the digits of ``a``, the operator, the digits of ``b`` and ``=``."""
    for key in [*a, op, *b, "="]:
        obs = tap(env, obs, key, Role.BUTTON)
    return obs


def open_folder(env: Env, obs: Observation, folder: str) -> Observation:
    """In the file chooser, open ``folder`` (in the folder shown) and wait until its button is in the path bar."""
    obs = tap(env, obs, folder, Role.LISTITEM)
    for _ in range(20):
        if any(e.text == folder and e.role is Role.BUTTON for e in obs.elements):
            break
        obs = env.step(Action(kind=ActionKind.WAIT)).observation
    return obs


def name_and_save(env: Env, obs: Observation, folder: str, name: str) -> Observation:
    """In a Save As file chooser: open ``folder`` (empty: stay in the home folder), name the file, Save."""
    obs, _ = wait_for(env, obs, "Name:", Role.TEXT)
    if folder:
        obs = open_folder(env, obs, folder)
    entry = next(e for e in obs.elements if e.role is Role.TEXTBOX)
    obs = type_into(env, obs, entry, name)
    time.sleep(0.3)
    return tap(env, obs, "Save", Role.BUTTON)


def save_as(env: Env, obs: Observation, folder: str, name: str) -> Observation:
    """Save As… (mousepad's File menu, gedit's main menu), then `name_and_save`."""
    if env.task.app == "gedit":
        obs = main_menu(env, obs)
        obs = tap(env, obs, "Save As", Role.BUTTON)
    else:
        obs = tap(env, obs, "File", Role.MENUITEM)
        obs = tap(env, obs, "Save As", Role.MENUITEM)
    return name_and_save(env, obs, folder, name)


def save(env: Env, obs: Observation) -> Observation:
    """Save (mousepad's File menu, gedit's header bar button)."""
    if env.task.app == "gedit":
        return tap(env, obs, "Save", Role.BUTTON)
    obs = tap(env, obs, "File", Role.MENUITEM)
    return tap(env, obs, "Save", Role.MENUITEM)


def quit_editor(env: Env, obs: Observation) -> Observation:
    """Quit (mousepad's File menu, gedit's window Close button): the "save changes?" dialog opens."""
    if env.task.app == "gedit":
        return tap(env, obs, "Close", Role.BUTTON)
    obs = tap(env, obs, "File", Role.MENUITEM)
    return tap(env, obs, "Quit", Role.MENUITEM)


def open_file(env: Env, obs: Observation, folder: str, name: str) -> Observation:
    """Open…, Home in Places, the folder, the file; wait until the editor shows it."""
    if env.task.app == "gedit":
        obs = tap(env, obs, "Open", Role.BUTTON)
    else:
        obs = tap(env, obs, "File", Role.MENUITEM)
        obs = tap(env, obs, "Open", Role.MENUITEM)
    obs, _ = wait_for(env, obs, "Cancel", Role.BUTTON)
    obs = tap(env, obs, "Home", Role.LISTITEM)
    obs = open_folder(env, obs, folder)
    obs = tap(env, obs, name, Role.LISTITEM)
    for _ in range(20):
        if name in obs.location:
            return obs
        obs = env.step(Action(kind=ActionKind.WAIT)).observation
    raise AssertionError(f"{name} did not open: {obs.location!r}")


def solve(env: Env, obs: Observation) -> Observation:
    """Solve the current task the way a person would."""
    task, p = env.task, env.task.params
    if task.id == "calc-add":
        return calculate(env, obs, p["a"], "+", p["b"])
    if task.id == "calc-multiply":
        return calculate(env, obs, p["a"], "*", p["b"])
    if task.id == "calc-subtract":
        return calculate(env, obs, p["a"], "-", p["b"])
    kind = task.id.split("-", 1)[1]
    if kind == "edit-save":
        obs = type_into(env, obs, editor(obs), p["text"])
        return save(env, obs)
    if kind == "quit-save":
        obs = type_into(env, obs, editor(obs), p["text"])
        obs = quit_editor(env, obs)
        return tap(env, obs, "Save", Role.BUTTON)
    if kind == "quit-save-new":
        obs = type_into(env, obs, editor(obs), p["text"])
        obs = quit_editor(env, obs)
        obs, _ = wait_for(env, obs, "Cancel", Role.BUTTON)
        # gedit's dialog offers "Save As…" for a document that has no file yet, mousepad's "Save"
        obs = tap(env, obs, "Save As" if any(e.text.startswith("Save As") for e in obs.elements) else "Save",
                  Role.BUTTON)
        return name_and_save(env, obs, p["folder"], p["name"])
    if kind in ("save-as", "save-home"):
        obs = type_into(env, obs, editor(obs), p["text"])
        return save_as(env, obs, p.get("folder", ""), p["name"])
    if kind == "save-copy":
        return save_as(env, obs, p["folder"], p["name"])
    if kind == "open-edit":
        obs = open_file(env, obs, p["folder"], p["name"])
        obs = type_into(env, obs, editor(obs), p["text"])
        return save(env, obs)
    raise AssertionError(f"no scripted solution for {task.id}")
