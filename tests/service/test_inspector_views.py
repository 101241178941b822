"""The inspector's views in real headless Chromium: a graph that stays readable at 200 states, knowledge
under honest headings, one round numbering, and an episode view with the step's screenshot and the
injected items (screenshots of each page, laptop and phone widths, under test-artifacts/)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import httpx
import pytest

from guimem.envs.browser import launch_chrome
from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.memory.catalog import provenance
from guimem.memory.graph import EdgeBody, NodeBody
from guimem.memory.hostile import quote_spans
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.http import create_app
from guimem.settings import BrowserSettings, GuimemSettings
from guimem.storage.base import Record
from guimem.storage.sqlite import SQLiteStore
from guimem.tasks import Suite, SuiteEntry
from guimem.testing.server import live_http
from guimem.types import Action, ActionKind, Behaviour, Role, Selector

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"
WIDTHS = {"laptop": 1366, "phone": 390}
SCREENS = ["login-user", "enter-text", "click-option", "choose-list", "email-inbox", "social-media", "book-flight",
           "search-engine", "navigate-tree", "click-tab-2", "use-autocomplete", "click-checkboxes"]


def _graph_store(path: Path, nodes: int = 200, seed: int = 7) -> list[str]:
    """A graph memory with ``nodes`` states over a dozen screens and about 1.5 edges per state."""
    rng = random.Random(seed)
    store = SQLiteStore(path)
    ids = [f"n-{i:04d}" for i in range(nodes)]
    for i, node_id in enumerate(ids):
        screen = SCREENS[i % len(SCREENS)]
        sig = f"app: miniwob\nscreen: {screen}\nbutton#b{i} Item {i}\ntextbox#t [field {i % 7}]"
        store.put(Record(id=node_id, kind="node", namespace="graph", status="active",
                         body=NodeBody(signature=sig, app="miniwob", first_task=screen).model_dump_json()))
    for j in range(int(nodes * 1.5)):
        a = rng.randrange(nodes)
        b = a + 1 if a + 1 < nodes and a % len(SCREENS) != len(SCREENS) - 1 else rng.randrange(nodes)
        action = Action(kind=ActionKind.TAP, selector=Selector(role=Role.BUTTON, text=f"Item {a}"))
        store.put(Record(id=f"e-{j:04d}", kind="edge", namespace="graph", status="active", body=EdgeBody(
            source=ids[a], target=ids[b], text=f"tap Item {a} (edge {j})", effect=f"shows state {b}",
            behaviour=Behaviour(actions=(action,)), success=rng.choice(["yes", "no", "uncertain"]),
            task=SCREENS[a % len(SCREENS)], episode_id=f"ep{j}").model_dump_json()))
    store.close()
    return ids


@pytest.fixture(scope="module")
def browser():
    b = launch_chrome(BrowserSettings(), window=(1366, 900))
    yield b.driver
    b.close()


def _open(browser, url, width):
    browser.set_window_size(width, 900)
    browser.get(url + "/")
    deadline = time.time() + 30
    while browser.execute_script("return document.body.dataset.loaded") is None and time.time() < deadline:
        time.sleep(0.1)
    assert browser.execute_script("return document.body.dataset.loaded") == "true", \
        browser.find_element("id", "summary").text


def _shoot(browser, width, name):
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(height, 5000))
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / name))
    browser.set_window_size(width, 900)


LABELS_JS = """
const labels = [...document.querySelectorAll('#graph-svg text.label')];
const shown = labels.filter(t => getComputedStyle(t).display !== 'none');
const boxes = shown.map(t => t.getBBox());
let overlaps = 0;
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) overlaps++;
}
return {labels: labels.length, shown: shown.length, overlaps,
        distinct: new Set(labels.map(t => t.textContent)).size,
        cut: labels.filter(t => /\\w…$/.test(t.textContent)).length};
"""


@pytest.mark.parametrize("device", list(WIDTHS))
def test_a_graph_of_200_states_stays_readable_and_every_state_is_findable(browser, tmp_path, device):
    ids = _graph_store(tmp_path / "g.sqlite")
    svc = MemoryService(ServiceSettings(store=str(tmp_path / "g.sqlite"), method="graph", create=False),
                        GuimemSettings())
    try:
        with live_http(create_app(svc)) as url:
            _open(browser, url, WIDTHS[device])
            labels = browser.execute_script(LABELS_JS)
            assert labels["labels"] == 200 and labels["distinct"] == 200, "every state has its own label"
            assert labels["shown"] >= 0.8 * 200, labels
            assert labels["overlaps"] == 0, labels
            assert labels["cut"] == 0, "labels are shortened at word boundaries only"
            _shoot(browser, WIDTHS[device], f"inspector-graph-200-{device}.png")
            search = browser.find_element("id", "graph-search")
            for node in random.Random(1).sample(ids, 5):  # any state is found by its id or screen text
                search.clear()
                search.send_keys(node)
                hits = browser.execute_script(
                    "return [...document.querySelectorAll('#graph-svg circle.node.hit')].map(c => c.dataset.node)")
                assert hits == [node]
                label_shown = browser.execute_script(
                    "const t = document.querySelector(`#graph-svg text.label[data-node='${arguments[0]}']`);"
                    "return getComputedStyle(t).display !== 'none'", node)
                assert label_shown, "a found state's label is shown even where it was hidden"
            search.clear()
            search.send_keys("Item 137 ")
            assert "1 found" in browser.find_element("id", "graph-found").text
            edge = browser.find_element("css selector", '#graph-svg path.edge[data-edge="e-0003"]')
            browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", edge)
            detail = browser.find_element("id", "detail").text
            assert "(edge 3)" in detail and "shows state" in detail and "outcome" in detail and "tap(" in detail
    finally:
        svc.close()


@pytest.fixture(scope="module")
def miniwob_run(tmp_path_factory):
    """A real MiniWoB++ run with screenshots: stack, 3 rounds, a task the explorer fails at first."""
    out = tmp_path_factory.mktemp("shots")
    suite = Suite(name="two", tasks=[SuiteEntry(task="enter-text", seed=1, max_steps=6),
                                     SuiteEntry(task="enter-text", seed=2, max_steps=6)])
    spec = EvalSpec(env="miniwob", suite=suite, rounds=3, methods=["none", "stack"], screenshots=True)
    Evaluation(spec, out, GuimemSettings()).run()
    return out


@pytest.mark.parametrize("device", list(WIDTHS))
def test_knowledge_headings_rounds_and_the_episode_view_with_screenshots(browser, miniwob_run, device):
    out = miniwob_run
    svc = MemoryService(ServiceSettings(store=str(out / "memory" / "stack.sqlite"), method="stack", create=False),
                        GuimemSettings())
    try:
        with live_http(create_app(svc, run_dir=out)) as url:
            _open(browser, url, WIDTHS[device])
            headings = browser.execute_script(
                "return [...document.querySelectorAll('#knowledge h3.status-heading')].map(h => h.dataset.status)")
            assert headings and set(headings) <= {"admitted", "trial", "candidate", "rejected"}
            rows = browser.execute_script(
                "return [...document.querySelectorAll('#knowledge table')].map(t => "
                "[t.previousElementSibling.dataset.status, [...t.querySelectorAll('tr.item td:nth-child(3)')]"
                ".map(td => td.textContent)])")
            for status, statuses in rows:  # every item sits under the heading of its own status
                assert all(s == status or (status == "rejected" and s == "retired") for s in statuses)
            evidence = [e.text for e in browser.find_elements("css selector", "#knowledge td:nth-child(6)")]
            assert all("Δ" not in e or "controls 0" not in e for e in evidence), "no Δ without controls"
            texts = [t.text for t in browser.find_elements("css selector", "#knowledge tr.item td:nth-child(5)")]
            records = {r.id: r for r in svc.store.query("stack")}
            for row_id, text in zip(browser.execute_script(
                    "return [...document.querySelectorAll('#knowledge tr.item')].map(r => r.id.slice(5))"), texts,
                    strict=True):
                body = json.loads(records[row_id].body)
                page = provenance(body)["page"]
                assert text == quote_spans(body["content"], page), "the whole text, never cut, page text quoted"
            options = browser.execute_script("return [...document.getElementById('run').options].map(o => o.text)")
            assert "stack · round 1" in options and "stack · round 3" in options and not any("round 0" in o
                                                                                              for o in options)
            browser.execute_script("document.getElementById('run').value = 'stack/2'")
            browser.find_element("id", "show-run").click()
            time.sleep(0.5)
            browser.execute_script("document.querySelectorAll('#episodes details').forEach(d => d.open = true)")
            deadline = time.time() + 10
            while time.time() < deadline and not browser.execute_script(
                    "return [...document.querySelectorAll('img.shot')].some(i => i.complete && i.naturalWidth > 0)"):
                time.sleep(0.2)
            assert browser.execute_script(
                "return [...document.querySelectorAll('img.shot')].filter(i => i.naturalWidth > 0).length") >= 2
            assert "[object" not in browser.find_element("id", "episodes").text
            links = browser.find_elements("css selector", "#episodes .ids button.item-link")
            assert links, "injected item ids are shown"
            links[0].click()
            time.sleep(0.5)
            assert links[0].text in browser.find_element("id", "detail").text
            _shoot(browser, WIDTHS[device], f"inspector-episode-{device}.png")
    finally:
        svc.close()


def test_screenshots_are_served_only_from_inside_the_run(miniwob_run, tmp_path):
    out = miniwob_run
    trace = RunDir(out).trace_file("stack", 0)
    first = json.loads(trace.read_text().splitlines()[0])
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG not yours")
    first["episode_id"] = "outside"
    first["steps"][0]["observation"]["screenshot"] = str(secret)
    first["steps"][1 if len(first["steps"]) > 1 else 0]["observation"]["screenshot"] = "../../etc/passwd"
    with trace.open("a") as f:
        f.write(json.dumps(first) + "\n")
    svc = MemoryService(ServiceSettings(store=str(out / "memory" / "stack.sqlite"), method="stack", create=False),
                        GuimemSettings())
    try:
        with live_http(create_app(svc, run_dir=out)) as url:
            ok = json.loads(trace.read_text().splitlines()[0])
            good = httpx.get(f"{url}/v1/runs/stack/0/{ok['episode_id']}/0/screenshot")
            assert good.status_code == 200 and good.content[:4] == b"\x89PNG"
            for step in (0, 1):
                bad = httpx.get(f"{url}/v1/runs/stack/0/outside/{step}/screenshot")
                assert bad.status_code == 404 and b"not yours" not in bad.content
            assert httpx.get(f"{url}/v1/runs/stack/0/..%2F..%2Fx/0/screenshot").status_code in (404, 422)
    finally:
        svc.close()
