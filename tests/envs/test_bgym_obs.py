"""BrowserGym observations → guimem observations, and guimem actions → BrowserGym action strings (no browser).

The fixtures are real observations recorded from BrowserGym 0.14.3 in Debian's chromium (script and style
texts dropped from the DOM snapshot's string table)."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guimem.envs.bgym_obs import (
    UnmappableActionError,
    benchmark_of,
    gym_id,
    location_of,
    normalise_task_id,
    parse_observation,
    to_browsergym,
)
from guimem.types import Action, ActionKind, Role, Selector, screen_signature

OBS: dict[str, Any] = json.loads((Path(__file__).parents[1] / "data" / "bgym_observations.json").read_text())


def test_task_ids_are_normalised_for_memory() -> None:
    assert normalise_task_id("browsergym/miniwob.click-test-2") == "click-test-2"
    assert normalise_task_id("miniwob.click-test-2") == normalise_task_id("click-test-2") == "click-test-2"
    assert normalise_task_id("webarena.310") == "webarena.310"
    assert gym_id("click-test-2") == gym_id("miniwob.click-test-2") == "browsergym/miniwob.click-test-2"
    assert gym_id("webarena.310") == "browsergym/webarena.310"
    assert benchmark_of("click-test-2") == "miniwob" and benchmark_of("workarena.servicenow.x") == "workarena"


def test_location_is_host_and_path_for_servers_and_never_a_local_task_page_name() -> None:
    assert location_of("file:///x/miniwob/html/miniwob/login-user.html") == ""  # the page's structure instead
    assert location_of("http://shop.local:7770/checkout/cart/?a=1#x") == "shop.local:7770/checkout/cart"
    assert location_of(None) == location_of(12) == ""


def test_login_form_reads_like_the_miniwob_env() -> None:
    obs = parse_observation(OBS["login-user"], app="miniwob").observation
    assert screen_signature(obs).splitlines() == [
        "app: miniwob", "screen: #form", "textbox#username [username]", "textbox#password [password]",
        "button#subbtn Login"]
    user = next(e for e in obs.elements if e.resource_id == "username")
    assert user.editable and user.clickable and user.container == "form"


def test_select_options_are_listed_and_map_to_select_option() -> None:
    parsed = parse_observation(OBS["choose-list"], app="miniwob")
    options = [e for e in parsed.observation.elements if e.role is Role.OPTION]
    assert len(options) == 4 and all(e.container == "options" for e in options)
    combo = next(e for e in parsed.observation.elements if e.role is Role.COMBOBOX)
    command = to_browsergym(Action(kind=ActionKind.TAP, ref=options[1].ref), parsed)
    assert command == f"select_option({combo.ref!r}, {options[1].text!r})"


def test_tab_links_are_tabs_and_clicked_spans_are_links() -> None:
    obs = parse_observation(OBS["click-tab-2"], app="miniwob").observation
    tabs = [e for e in obs.elements if e.role is Role.TAB]
    assert [t.resource_id for t in tabs] == ["ui-id-1", "ui-id-2", "ui-id-3"]
    assert sum(e.role is Role.LINK for e in obs.elements) >= 3


@pytest.mark.parametrize("text", ["it's \"quoted\"", "line\nbreak')\nimport os #", "\\x00 \u202e", ""])
def test_typed_text_becomes_one_literal_argument_whatever_it_holds(text: str) -> None:
    parsed = parse_observation(OBS["login-user"], app="miniwob")
    ref = next(e.ref for e in parsed.observation.elements if e.editable)
    call = ast.parse(to_browsergym(Action(kind=ActionKind.TYPE, ref=ref, text=text), parsed), mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "fill"
    assert [ast.literal_eval(a) for a in call.args] == [ref, text]


@pytest.mark.parametrize("ref", ["999", "13') or ('1", ""])
def test_a_ref_not_on_the_screen_is_refused_before_browsergym(ref: str) -> None:
    parsed = parse_observation(OBS["login-user"], app="miniwob")
    with pytest.raises(UnmappableActionError):
        to_browsergym(Action(kind=ActionKind.TAP, ref=ref), parsed)
    with pytest.raises(UnmappableActionError):
        to_browsergym(Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Logout")), parsed)


def test_a_selector_is_resolved_on_the_screen() -> None:
    parsed = parse_observation(OBS["login-user"], app="miniwob")
    login = next(e for e in parsed.observation.elements if e.role is Role.BUTTON)
    assert to_browsergym(Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text="Login")),
                         parsed) == f"click({login.ref!r})"


def test_keys_scroll_and_unsupported_actions() -> None:
    parsed = parse_observation(OBS["login-user"], app="miniwob")
    assert to_browsergym(Action(kind=ActionKind.KEY, key="enter"), parsed) == "keyboard_press('Enter')"
    assert to_browsergym(Action(kind=ActionKind.SCROLL, direction="up"), parsed) == "scroll(0, -100)"
    with pytest.raises(UnmappableActionError):
        to_browsergym(Action(kind=ActionKind.KEY, key="launch-missiles"), parsed)
    with pytest.raises(UnmappableActionError):
        to_browsergym(Action(kind=ActionKind.OPEN_APP, app="x"), parsed)


def _mangle(value: Any, depth: int = 0) -> list[Any]:
    """The same observation with one part replaced by junk at every place (types a page cannot control
    but a broken or hostile transport can)."""
    return [None, 7, "x" * 10_000, [], {}, [None, {"nodeId": {}}]] if depth < 1 else [value]


@pytest.mark.parametrize("key", ["axtree_object", "dom_object", "extra_element_properties", "url",
                                 "focused_element_bid"])
@pytest.mark.parametrize("junk", _mangle(None))
def test_malformed_parts_give_fewer_elements_never_an_error(key: str, junk: Any) -> None:
    obs = copy.deepcopy(OBS["login-user"])
    obs[key] = junk
    parse_observation(obs, app="miniwob")


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                max_size=4),
                    max_leaves=30))
def test_arbitrary_nodes_never_raise(node: Any) -> None:
    obs = copy.deepcopy(OBS["choose-list"])
    obs["axtree_object"]["nodes"] = [*obs["axtree_object"]["nodes"][:5], node, {"nodeId": "x", "childIds": node,
                                                                                "role": node, "name": node}]
    parsed = parse_observation(obs, app="miniwob")
    assert all(len(e.text) <= 120 and len(e.label) <= 80 for e in parsed.observation.elements)


def test_hostile_texts_are_capped_and_bids_are_checked() -> None:
    obs = copy.deepcopy(OBS["login-user"])
    nodes = obs["axtree_object"]["nodes"]
    button = next(n for n in nodes if n["role"]["value"] == "button")
    button["name"]["value"] = "<script>alert(1)</script>" * 500
    evil = copy.deepcopy(button)
    evil["browsergym_id"] = "1'); import os; ('"
    evil["nodeId"] = "evil"
    nodes[0]["childIds"].append("evil")
    nodes.append(evil)
    out = parse_observation(obs, app="miniwob").observation
    assert all(len(e.text) <= 120 for e in out.elements)
    assert all("'" not in e.ref for e in out.elements)


def test_a_browsergym_suite_is_checked_against_miniwobs_tasks() -> None:
    from guimem.errors import SuiteError
    from guimem.tasks import load_suite
    from guimem.tasks.suites import Suite, SuiteEntry, check_suite_tasks

    shipped = load_suite("bgym-miniwob")
    assert shipped.env == "browsergym" and len(shipped.tasks) == len(load_suite("demo").tasks)
    check_suite_tasks(shipped, "browsergym")
    bad = Suite(name="x", env="browsergym", tasks=(SuiteEntry(task="miniwob.click-tset-2"),
                                                   SuiteEntry(task="webarena.310")))
    with pytest.raises(SuiteError, match="click-tset-2"):
        check_suite_tasks(bad, "browsergym")
    check_suite_tasks(Suite(name="y", env="browsergym", tasks=(SuiteEntry(task="webarena.310"),)), "browsergym")
