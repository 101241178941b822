"""report.html: one self-contained page a researcher can read, checked on its markup and in real headless
Chromium at laptop and phone widths (screenshots under test-artifacts/)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from guimem.harness.charts import nice_ticks
from guimem.harness.evaluate import Evaluation
from guimem.harness.metrics import summarise
from guimem.harness.report import write_report
from guimem.harness.runfiles import EvalSpec, RunDir
from guimem.settings import GuimemSettings
from guimem.tasks import load_suite
from guimem.types import shorten

DATA = Path(__file__).parent.parent / "data"
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"
METHODS = ["none", "graph", "steer", "stack"]
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    spec = EvalSpec(env="form", suite=load_suite(str(DATA / "form_suite.json")), rounds=3, methods=METHODS,
                    embedder="hashing:384")
    Evaluation(spec, out, settings).run()
    # a hostile injection text and error in one recorded step: the report must show them as text
    trace = RunDir(out).trace_file("steer", 1)
    lines = trace.read_text().splitlines()
    first = json.loads(lines[0])
    first["steps"][0]["injection"]["text"] = HOSTILE
    first["steps"][0]["error"] = {"code": "no_such_element", "message": HOSTILE, "action": "tap"}
    trace.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    run_dir = RunDir(out)
    spec = run_dir.load_spec()
    write_report(run_dir, spec, summarise(spec, run_dir.results(), run_dir))
    return out


def test_every_run_text_is_escaped_and_the_page_has_no_scripts_or_external_assets(run):
    page = (run / "report.html").read_text()
    assert "<script" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "self-contained: no external assets"


def test_every_matrix_square_opens_an_embedded_episode(run):
    page = (run / "report.html").read_text()
    targets = re.findall(r'class="sq [a-z]+" href="#([^"]+)"', page)
    sections = set(re.findall(r'<section class="episode" id="([^"]+)"', page))
    assert len(targets) == 4 * 3 * len(METHODS), "one square per (task, seed) × method × round"
    assert set(targets) == sections


def test_item_and_step_texts_are_shortened_at_word_boundaries_only():
    text = "word " * 400
    short = shorten(text, 100)
    assert short.startswith("word word") and re.search(r"word … \(\d+ more characters\)$", short)
    assert shorten("short", 100) == "short"


def test_axis_ticks_are_round_numbers():
    assert nice_ticks(4.5) == [0, 1, 2, 3, 4, 5]
    assert nice_ticks(148) == [0, 50, 100, 150]
    assert all(float(t).is_integer() for t in nice_ticks(37))


@pytest.fixture(scope="module")
def browser():
    from guimem.envs.browser import launch_chrome
    from guimem.settings import BrowserSettings

    b = launch_chrome(BrowserSettings(), window=(1366, 900))
    yield b.driver
    b.close()


def _colour_of(driver, selector):
    return driver.execute_script(
        "const el = document.querySelector(arguments[0]); if (!el) return null;"
        "const s = getComputedStyle(el); return el.tagName === 'polyline' ? s.stroke : "
        "(el.classList.contains('swatch') ? s.backgroundColor : s.fill);", selector)


@pytest.mark.browser
@pytest.mark.parametrize("width,shot", [(1366, "report-laptop.png"), (390, "report-phone.png")])
def test_the_report_renders_readably_in_chromium(browser, run, width, shot):
    browser.set_window_size(width, 900)
    browser.get((run / "report.html").as_uri())
    titles = browser.execute_script("return [...document.querySelectorAll('svg.chart')].map(s => s.dataset.title)")
    for wanted in ("Pass@k (%)", "Injected tokens, all rounds", "Memory size after each round (items)"):
        assert wanted in titles
    assert any(t.startswith("Recall latency") for t in titles)
    assert sum(t in METHODS for t in titles) == len(METHODS) - 1, "one small Pass@k panel per method but none"
    assert browser.execute_script("return document.querySelectorAll('polygon.band').length") >= len(METHODS), \
        "CI bands"
    for m in METHODS:  # one colour per method in every chart and in the table
        colours = {_colour_of(browser, f'svg.chart polyline.line[data-method="{m}"]'),
                   _colour_of(browser, f'rect.bar[data-method="{m}"]'),
                   _colour_of(browser, f'circle.p50[data-method="{m}"]'),
                   _colour_of(browser, f'table.main .swatch[data-method="{m}"]'),
                   _colour_of(browser, f'table.matrix .swatch[data-method="{m}"]')}
        if m != "none":
            colours.add(_colour_of(browser, f'svg[data-title="Memory size after each round (items)"] '
                                            f'polyline[data-method="{m}"]'))
        assert len(colours) == 1 and None not in colours, (m, colours)
    ticks = browser.execute_script("return [...document.querySelectorAll('text.tick')].map(t => t.textContent)")
    assert ticks and all(re.fullmatch(r"[\d,]+", t) for t in ticks), ticks
    # the first square opens its episode (hidden until then), with the step's injection
    anchor = browser.find_element("css selector", "table.matrix a.sq")
    target = anchor.get_attribute("href").split("#", 1)[1]
    assert browser.execute_script("return getComputedStyle(document.getElementById(arguments[0])).display",
                                  target) == "none"
    anchor.click()
    time.sleep(0.2)
    assert browser.execute_script("return getComputedStyle(document.getElementById(arguments[0])).display",
                                  target) == "block"
    if width >= 1000:
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), \
            "no horizontal scrolling of the page on a laptop (wide tables scroll in their own box)"
    browser.get((run / "report.html").as_uri())
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(height, 6000))
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / shot))
    learned = browser.execute_script("return [...document.querySelectorAll('table.learned td')].length")
    assert learned > 0, "what memory learned, with its evidence"


OWN = "mypkg.last_success:LastSuccessMemory"


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """A run of a user's own method (named by its import path) on the user's own env, from a shell."""
    from tests.shell import run_guimem, user_project

    project = user_project(tmp_path_factory.mktemp("own") / "project")
    done = run_guimem("eval", "--env", "mypkg.counter:CounterEnv", "--suite", "suite.json", "--rounds", "2",
                      "--methods", OWN, "--out", "run", cwd=project)
    assert done.returncode == 0, done.stderr
    return project / "run" / "report.html"


def test_what_memory_learned_counts_the_events_of_a_method_that_keeps_no_items(own_run):
    section = own_run.read_text().split("<h2>What memory learned</h2>", 1)[1].split('<div class="episodes">', 1)[0]
    assert "nothing" not in section, section
    assert "6 events" in section, section  # 3 episodes a round, each logged at its boundary
    assert "last-success" in section, "the method's own name is shown beside its import path"


def test_long_import_path_names_fit_the_chart_legends_and_panel_titles(own_run):
    own_run = own_run.read_text()
    legends = re.findall(r'class="s legend"[^>]*>([^<]*)</text>', own_run)
    assert legends and all(len(t) <= 28 for t in legends), legends
    panel = re.search(rf'<svg class="chart"[^>]*data-title="{re.escape(OWN)}"><title>[^<]*</title>'
                      r'<text[^>]*class="t">([^<]*)</text>', own_run)
    assert panel and len(panel.group(1)) <= 30 and "LastSuccessMemory" in panel.group(1), panel
    labels = re.findall(r'text-anchor="end" class="s">([^<]*)<title>', own_run)  # bars and latency rows
    assert len(labels) == 4 and all(len(t) <= 28 for t in labels), labels


@pytest.mark.browser
@pytest.mark.parametrize("width,shot", [(1366, "report-own-laptop.png"), (390, "report-own-phone.png")])
def test_the_report_of_an_import_path_method_fits_the_page(browser, own_run, width, shot):
    browser.set_window_size(width, 900)
    browser.get(own_run.as_uri())
    if width >= 1000:
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), \
            "no horizontal scrolling of the page on a laptop"
        assert browser.execute_script(
            "const t = document.querySelector('table.main'); return t.scrollWidth <= t.parentElement.clientWidth"), \
            "the main table, infra column included, fits without scrolling"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(width, min(height, 6000))
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / shot))


def test_an_item_admitted_by_hand_is_shown_as_such_in_what_memory_learned(run, tmp_path):
    import shutil

    from guimem.harness.report import render
    from guimem.harness.reportdata import collect, learned
    from guimem.service.core import MemoryService, ServiceSettings

    store = tmp_path / "steer.sqlite"
    shutil.copy(run / "memory" / "steer.sqlite", store)
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    service = MemoryService(ServiceSettings(store=str(store), method="steer"), settings)
    try:
        trial = next(i for i in service.list_items("knowledge", "trial"))
        service.set_status(trial.id, "admitted", "looks right to me")
    finally:
        service.close()
    items = {i.id: i for i in learned(store, "steer").items}
    assert items[trial.id].status == "admitted" and items[trial.id].manual
    assert not any(i.manual for i in items.values() if i.id != trial.id)
    run_dir = RunDir(run)
    spec = run_dir.load_spec()
    data = collect(run_dir, spec, run_dir.results())
    data.learned["steer"] = learned(store, "steer")
    page = render(spec, summarise(spec, run_dir.results(), run_dir), data)
    assert page.count("<b>by hand</b>") == 1 and "<td>admitted <b>by hand</b></td>" in page


def test_the_pass_table_counts_harm_and_the_page_names_each_case(run, tmp_path):
    from guimem.harness.metrics import HarmCase
    from guimem.harness.report import pass_table

    run_dir = RunDir(run)
    spec = run_dir.load_spec()
    summary = summarise(spec, run_dir.results(), run_dir)
    graph = summary.methods["graph"].model_copy(update={"harm": [HarmCase(task="<b>t</b>", seed=3, round=1)]})
    summary = summary.model_copy(update={"methods": {**summary.methods, "graph": graph}})
    headers, rows = pass_table(summary)
    column = headers.index("harm")
    assert {r[0]: r[column] for r in rows}["graph"] == "1" and {r[0]: r[column] for r in rows}["none"] == "–"
    out = tmp_path / "copy"
    shutil.copytree(run, out)
    write_report(RunDir(out), spec, summary)
    assert "graph: &lt;b&gt;t&lt;/b&gt; 3 r2" in (out / "report.html").read_text(), "escaped, rounds from 1"


def test_what_memory_learned_reads_a_large_store_a_chunk_at_a_time_and_keeps_the_same_best_items(tmp_path,
                                                                                                 monkeypatch):
    """#34: the report read every item of a method's store at once (store.query) to keep 8 of them: after an
    evaluation on a memory of a million skills its process held 5.4 GB. It scans in chunks now and keeps the
    best few as it goes: what sorting every skill gives."""
    import random

    from guimem.harness.reportdata import TOP_ITEMS, learned
    from guimem.storage import Record
    from guimem.storage.base import EventDraft
    from guimem.storage.sqlite import SQLiteStore

    rng = random.Random(4)
    path = tmp_path / "skills.sqlite"
    store = SQLiteStore(path)
    uses: dict[str, int] = {}
    status: dict[str, str] = {}
    with store.transaction():
        for i in range(2600):
            sid = f"sk-{i:05d}"
            body = {"name": f"skill_{i}", "description": f"tap(button \"B{i}\")"}
            status[sid] = rng.choice(["verified", "unverified"])
            store.put(Record(sid, "skill", "skills", status[sid], json.dumps(body)))
            uses[sid] = rng.choice([0, 0, 0, 1, 2, 5])
            for k in range(uses[sid]):
                store.append_event(EventDraft("used", sid, "skills", json.dumps({"success": k % 2 == 0})))
    store.close()

    def whole(*args, **kwargs):
        raise AssertionError("every item read at once")
    monkeypatch.setattr(SQLiteStore, "query", whole)
    shown = learned(path, "skills")
    rank = {"verified": 0, "unverified": 4}
    expected = sorted(uses, key=lambda s: (-uses[s], rank[status[s]], s))[:TOP_ITEMS]
    assert [s.id for s in shown.skills] == expected and shown.skills[0].uses == 5
