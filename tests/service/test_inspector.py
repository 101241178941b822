"""The memory inspector page in real headless Chromium, on memories from a real evaluation run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from guimem.envs.browser import launch_chrome
from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import EvalSpec
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.http import create_app
from guimem.settings import BrowserSettings, GuimemSettings
from guimem.tasks import load_suite
from guimem.testing.server import live_http

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"
DATA = Path(__file__).parent.parent / "data"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    spec = EvalSpec(env="form", suite=load_suite(str(DATA / "form_suite.json")), rounds=4,
                    methods=["graph", "steer"], embedder="hashing:384")
    Evaluation(spec, out, settings).run()
    return out, settings


@pytest.fixture(scope="module")
def browser():
    b = launch_chrome(BrowserSettings(), window=(1200, 1400))
    yield b.driver
    b.close()


def _wait_loaded(browser, timeout_s: float = 20.0) -> None:
    """Until the inspector says it finished loading (or failed), at most ``timeout_s``."""
    deadline = time.time() + timeout_s
    while browser.execute_script("return document.body.dataset.loaded") is None and time.time() < deadline:
        time.sleep(0.1)


def _page(browser, run_dir, method, shot):
    out, settings = run_dir
    svc = MemoryService(ServiceSettings(store=str(out / "memory" / f"{method}.sqlite"), method=method), settings)
    try:
        with live_http(create_app(svc, run_dir=out)) as url:
            browser.get(url + "/")
            _wait_loaded(browser)
            assert browser.execute_script("return document.body.dataset.loaded") == "true", \
                browser.find_element("id", "summary").text
            ARTIFACTS.mkdir(exist_ok=True)
            result = {
                "nodes": len(browser.find_elements("css selector", "#graph-svg circle.node")),
                "edges": {cls: len(browser.find_elements("css selector", f"#graph-svg path.edge.success-{cls}"))
                          for cls in ("yes", "no", "uncertain")},
                "evidence": [e.text for e in browser.find_elements("css selector", "#knowledge .evidence")],
                "statuses": [e.text for e in browser.find_elements("css selector",
                                                                   "#knowledge tr.item td:nth-child(3)")],
                "runs": browser.execute_script("return document.getElementById('run').options.length"),
                "legend": browser.execute_script("return [...document.querySelectorAll('#graph .pill')]"
                                                 ".map(p => getComputedStyle(p).color)"),
            }
            browser.execute_script("document.getElementById('run').value = arguments[0]", f"{method}/1")
            browser.find_element("id", "show-run").click()
            time.sleep(0.5)
            result["episodes"] = len(browser.find_elements("css selector", "#episodes details"))
            browser.save_screenshot(str(ARTIFACTS / shot))
            return result
    finally:
        svc.close()


def test_inspector_draws_the_graph_with_edges_coloured_by_success(browser, run_dir):
    page = _page(browser, run_dir, "graph", "inspector-graph.png")
    assert page["legend"] == ["rgb(26, 127, 55)", "rgb(207, 34, 46)", "rgb(140, 149, 159)"], "legend colours (CSP-safe)"
    assert page["nodes"] >= 1
    assert page["edges"]["yes"] >= 1 and page["edges"]["no"] >= 1
    assert page["runs"] >= 2 and page["episodes"] == 4
    assert (ARTIFACTS / "inspector-graph.png").read_bytes()[:4] == b"\x89PNG"


def test_inspector_shows_knowledge_items_with_status_and_evidence(browser, run_dir):
    page = _page(browser, run_dir, "steer", "inspector-steer.png")
    assert page["statuses"], "knowledge items are listed"
    assert any("trials" in e and "controls" in e and "harms" in e for e in page["evidence"])


XSS = '<img src=x onerror="document.body.dataset.pwned=1"><script>document.body.dataset.pwned=2</script>'


def _hostile_export(run_dir, tmp_path) -> tuple[Path, Path]:
    """A real steer export with script in every item text, and one with a string where evidence counts go."""
    out, settings = run_dir
    svc = MemoryService(ServiceSettings(store=str(out / "memory" / "steer.sqlite"), method="steer"), settings)
    clean = tmp_path / "clean.jsonl"
    svc.export(clean)
    svc.close()
    lines = [json.loads(line) for line in clean.read_text().splitlines()]
    for line in lines:
        if line["type"] == "record":
            line["body"]["content"] = XSS + line["body"]["content"]
    texts = tmp_path / "data" / "texts.jsonl"
    texts.parent.mkdir(exist_ok=True)
    texts.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    typed = [dict(x) for x in lines]
    typed.append({"type": "event", "event": "evidence", "item_id": lines[1]["id"],
                  "payload": {"trials": XSS, "controls": 0}})
    bad = tmp_path / "data" / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(x) for x in typed) + "\n")
    return texts, bad


def test_hostile_item_texts_render_as_text_and_no_script_runs_even_with_a_key(browser, run_dir, tmp_path):
    _, settings = run_dir
    _hostile_export(run_dir, tmp_path)
    svc = MemoryService(ServiceSettings(store=str(tmp_path / "hostile.sqlite"), method="steer",
                                        data_dir=tmp_path / "data"), settings)
    try:
        with live_http(create_app(svc, api_key="k")) as url:
            headers = {"Authorization": "Bearer k"}
            refused = httpx.post(f"{url}/v1/import", json={"path": "bad.jsonl"}, headers=headers)
            assert refused.status_code == 422 and "trials" in refused.json()["message"]
            assert httpx.post(f"{url}/v1/import", json={"path": "texts.jsonl"}, headers=headers).status_code == 200
            browser.get(url + "/")
            browser.find_element("id", "key").send_keys("k")
            browser.find_element("css selector", "#key-form button").click()
            deadline = time.time() + 20
            while browser.execute_script("return document.body.dataset.loaded") != "true" and time.time() < deadline:
                time.sleep(0.1)
            assert browser.execute_script("return document.body.dataset.loaded") == "true", \
                browser.find_element("id", "summary").text
            time.sleep(0.5)  # an injected onerror would have fired by now
            assert browser.execute_script("return document.body.dataset.pwned") is None
            assert browser.find_elements("css selector", "#knowledge img, #knowledge script") == []
            assert "<img src=x onerror=" in browser.find_element("id", "knowledge").text
            assert browser.execute_script("return window.localStorage.length") == 0
            browser.save_screenshot(str(ARTIFACTS / "inspector-hostile.png"))
    finally:
        svc.close()


def test_an_item_admitted_by_hand_is_listed_under_its_own_heading_never_as_verified(browser, run_dir, tmp_path):
    import shutil

    out, settings = run_dir
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    svc = MemoryService(ServiceSettings(store=str(copy / "memory" / "steer.sqlite"), method="steer"), settings)
    item = next(i for i in svc.list_items() if i.status in ("candidate", "trial"))
    if item.status == "candidate":
        svc.set_status(item.id, "trial", "test")
    svc.set_status(item.id, "admitted", "a person said so")
    try:
        with live_http(create_app(svc, run_dir=copy)) as url:
            browser.get(url + "/")
            _wait_loaded(browser)
            headings = [e.text for e in browser.find_elements("css selector", "#knowledge h3.status-heading")]
            row = browser.find_element("id", "item-" + item.id).text
    finally:
        svc.close()
    assert any(h.startswith("Admitted by hand") for h in headings), headings
    assert not any(h.startswith("Verified") for h in headings), headings
    assert "(by hand)" in row


def test_the_first_paint_says_loading_not_that_the_memory_is_empty():
    page = (Path(__file__).parents[2] / "src" / "guimem" / "service" / "static" / "inspector.html").read_text()
    assert "in this memory" not in page and "no run directory" not in page
    assert page.count("loading…") >= 5


def test_an_empty_memory_says_so_once_loaded(browser, tmp_path):
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    svc = MemoryService(ServiceSettings(store=str(tmp_path / "m.sqlite"), method="steer"), settings)
    try:
        with live_http(create_app(svc)) as url:
            browser.get(url + "/")
            _wait_loaded(browser)
            texts = {i: browser.find_element("id", i).text for i in ("skills", "knowledge", "episodes")}
    finally:
        svc.close()
    assert texts == {"skills": "no skills in this memory", "knowledge": "no knowledge items in this memory",
                     "episodes": "no run directory served"}


def test_the_stacks_skills_are_listed_as_skills_and_every_knowledge_row_says_what_it_is(browser, tmp_path):
    """The stack keeps its skills as knowledge items (they earn admission like the rest): the inspector once said
    "no skills in this memory" while the report listed them and recall injected them."""
    from tests.service.test_core import service, trajectories

    svc = service(tmp_path, method="stack")
    try:
        for _ in range(2):
            svc.learn_file(trajectories(tmp_path))
            svc.end_round()
        skills = [i for i in svc.list_items("skill")]
        assert skills and all(i.kind == "knowledge" and i.what == "skill" for i in skills), skills
        with live_http(create_app(svc)) as url:
            browser.get(url + "/")
            _wait_loaded(browser)
            listed = browser.find_element("id", "skills").text
            kinds = [e.text for e in browser.find_elements("css selector", "#knowledge tr.item td:nth-child(2)")]
            code = browser.find_element("css selector", "#skills pre.code").text
            browser.save_screenshot(str(ARTIFACTS / "inspector-stack-skills.png"))
    finally:
        svc.close()
    assert "no skills" not in listed and all(s.id in listed for s in skills)
    assert "def " in code or "type(" in code, code
    assert {"skill", "procedure", "warning"} <= set(kinds), kinds
