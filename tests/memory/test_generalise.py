"""Generalising recorded actions into templates that resolve on other seeds of the same task."""

from __future__ import annotations

from guimem.memory.generalise import generalise_selector
from guimem.types import Observation, Role, Selector, UIElement


def _radios(target_id: str) -> Observation:
    names = {"ch0": "fzzqo", "ch1": "9NY", "ch2": "yS82i"}
    return Observation(app="miniwob", location="click-option", elements=tuple(
        UIElement(ref=str(i), role=Role.RADIO, label=name, resource_id=rid, clickable=True)
        for i, (rid, name) in enumerate(names.items())))


def test_a_selector_named_by_a_task_value_drops_the_id_it_had_that_time():
    recorded = Selector(role=Role.RADIO, label="9NY", resource_id="ch1")  # seed 1: the target sat at ch1
    template = generalise_selector(recorded, {"target": "9NY"})
    assert template.label == "{target}" and template.resource_id == ""
    other_seed = template.bind({"target": "yS82i"}).resolve(_radios("ch2"))  # seed 2: it sits at ch2
    assert other_seed.ok and other_seed.element is not None and other_seed.element.resource_id == "ch2"


def test_a_selector_not_named_by_a_task_value_keeps_its_id():
    recorded = Selector(role=Role.BUTTON, text="Submit", resource_id="subbtn")
    assert generalise_selector(recorded, {"target": "9NY"}).resource_id == "subbtn"
