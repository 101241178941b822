"""The report and the inspector of a run with a user's own (import-path) method, at laptop (1366 px) and phone
(390 px) widths in real headless Chromium: no horizontal scrolling of the page at either (a wide table may
scroll inside its own box). Screenshots under test-artifacts/."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from guimem.envs.browser import launch_chrome
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.http import create_app
from guimem.settings import BrowserSettings, GuimemSettings
from guimem.testing.server import live_http
from tests.shell import run_guimem, user_project

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).parent.parent.parent / "test-artifacts"
OWN = "mypkg.last_success:LastSuccessMemory"
WIDTHS = [(1366, "laptop"), (390, "phone")]


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """A run of a user's own method (named by its import path) on the user's own env, from a shell."""
    project = user_project(tmp_path_factory.mktemp("own") / "project")
    done = run_guimem("eval", "--env", "mypkg.counter:CounterEnv", "--suite", "suite.json", "--rounds", "2",
                      "--methods", OWN, "--out", "run", cwd=project)
    assert done.returncode == 0, done.stderr
    return project / "run"


@pytest.fixture(scope="module")
def browser():
    b = launch_chrome(BrowserSettings(), window=(1366, 900))
    yield b.driver
    b.close()


def _at_width(browser, width: int, height: int = 900) -> None:
    """The viewport ``width`` CSS px wide: headless Chromium's window does not shrink below about 500 px, so a
    phone is emulated through the DevTools protocol, as a device toolbar would."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def _overflow(browser) -> list[str]:
    """The page's horizontal overflow (empty when none), naming the widest elements that stick out."""
    return browser.execute_script("""
        const root = document.documentElement;
        if (root.scrollWidth <= window.innerWidth) return [];
        return [`scrollWidth ${root.scrollWidth} > innerWidth ${window.innerWidth}`,
                ...[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right >
                    window.innerWidth + 1).slice(0, 8).map(e => `${e.tagName}.${e.className} ` +
                    `${Math.round(e.getBoundingClientRect().right)}`)];""")


def _shoot(browser, width: int, name: str) -> None:
    height = browser.execute_script("return document.documentElement.scrollHeight")
    _at_width(browser, width, min(height, 6000))
    time.sleep(0.2)
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / name))


@pytest.mark.parametrize("width,label", WIDTHS)
def test_the_report_of_an_import_path_method_never_scrolls_sideways(browser, own_run, width, label):
    _at_width(browser, width)
    browser.get((own_run / "report.html").as_uri())
    assert browser.execute_script("return window.innerWidth") == width
    assert _overflow(browser) == []
    scales = browser.execute_script("return [...document.querySelectorAll('svg.chart')].map(s => "
                                    "[s.dataset.title, s.getBoundingClientRect().width / s.viewBox.baseVal.width])")
    small = [(title, round(scale, 2)) for title, scale in scales if scale < 0.7]
    assert scales and small == [], f"charts drawn too small to read (a wide chart scrolls in its box): {small}"
    _shoot(browser, width, f"report-own-{label}.png")


def _wait_loaded(browser, timeout_s: float = 20.0) -> None:
    deadline = time.time() + timeout_s
    while browser.execute_script("return document.body.dataset.loaded") is None and time.time() < deadline:
        time.sleep(0.1)


@pytest.mark.parametrize("width,label", WIDTHS)
def test_the_inspector_of_an_import_path_method_never_scrolls_sideways(browser, own_run, width, label,
                                                                      monkeypatch):
    monkeypatch.chdir(own_run.parent)  # where the user's mypkg/ is, as for guimem serve
    settings = GuimemSettings()
    settings.embedder.name = "hashing"
    store = own_run / "memory" / "mypkg.last_success.LastSuccessMemory.sqlite"
    svc = MemoryService(ServiceSettings(store=str(store), method=OWN), settings)
    try:
        with live_http(create_app(svc, run_dir=own_run)) as url:
            _at_width(browser, width)
            browser.get(url + "/")
            _wait_loaded(browser)
            assert browser.execute_script("return document.body.dataset.loaded") == "true", \
                browser.find_element("id", "summary").text
            summary = browser.find_element("id", "summary").text
            assert "6 events" in summary and ": ;" not in summary and "no items" in summary, summary
            own = browser.execute_script("return [...document.getElementById('run').options].map(o => o.value)"
                                         ".filter(v => !v.startsWith('none/')).pop()")
            browser.execute_script("document.getElementById('run').value = arguments[0]", own)
            browser.find_element("id", "show-run").click()
            time.sleep(0.5)
            episodes = [e.text for e in browser.find_elements("css selector", "#episodes details summary")]
            assert episodes and all(t.endswith("(1 step)") for t in episodes), episodes
            browser.execute_script("document.querySelector('#episodes details').open = true")
            assert browser.execute_script("return window.innerWidth") == width
            assert _overflow(browser) == []
            _shoot(browser, width, f"inspector-own-{label}.png")
    finally:
        svc.close()
