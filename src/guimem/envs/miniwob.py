"""MiniWoB++ (the ``miniwob`` package's task pages) in Debian's headless Chromium.

- One browser per env instance, reused across episodes and tasks; `close` quits it.
- The in-page episode timer is lifted (tasks otherwise end themselves after 10 s).
- Success is MiniWoB's *raw* reward reaching 1 (the time-scaled reward is not used); ``score`` is
  the raw reward in [-1, 1].
- Elements come from our own DOM snapshot (roles, labels from ``<label>``/placeholder/aria, ids),
  with refs shared with MiniWoB's ``core.getDOMInfo`` so ``core.elementClick`` acts on them.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from guimem.envs.base import Preview, StartMemo, Transition, show_preview
from guimem.envs.browser import Browser, DevToolsPage, launch_chrome
from guimem.errors import EnvError, MissingDependencyError, SuiteError
from guimem.settings import BrowserSettings, GuimemSettings
from guimem.types import (
    Action,
    ActionError,
    ActionErrorCode,
    ActionKind,
    Bounds,
    Observation,
    Outcome,
    Role,
    Task,
    UIElement,
    page_view,
)
from guimem.types.ui import note_source

log = logging.getLogger(__name__)

KEYS = {
    "enter": "<Enter>", "tab": "<Tab>", "backspace": "<Backspace>", "delete": "<Delete>", "space": "<Space>",
    "up": "<ArrowUp>", "down": "<ArrowDown>", "left": "<ArrowLeft>", "right": "<ArrowRight>",
    "pageup": "<PageUp>", "pagedown": "<PageDown>", "escape": "<Escape>", "home": "<Home>", "end": "<End>",
}
_QUOTED = re.compile(r"[\"“']([^\"”']{1,80})[\"”']")
_TAP_JS = """
var el = core.previousDOMInfo[arguments[0]];
if (!el) return 'no element with ref ' + arguments[0];
if (el.tagName === 'OPTION') {
  var sel = el.parentElement.tagName === 'SELECT' ? el.parentElement : el.closest('select');
  el.selected = true;
  sel.dispatchEvent(new Event('input', {bubbles: true}));
  sel.dispatchEvent(new Event('change', {bubbles: true}));
  return true;
}
return core.elementClick(arguments[0]);
"""
_CLEAR_JS = """
var el = core.previousDOMInfo[arguments[0]];
if (!el) return 'no element with ref ' + arguments[0];
if (!('value' in el)) return 'element is not editable';
el.value = ''; return true;
"""


@contextmanager
def _browser_failures() -> Iterator[None]:
    """Selenium and transport errors (a crashed browser or driver) become `EnvError`: infrastructure."""
    from selenium.common.exceptions import WebDriverException
    from urllib3.exceptions import HTTPError as TransportError

    try:
        yield
    except (WebDriverException, TransportError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise EnvError(f"the browser failed: {type(exc).__name__}: {first}",
                       suggestion="check `guimem doctor`; the episode is run again on resume") from exc


def miniwob_html_dir() -> Path:
    """Where the ``miniwob`` package keeps its task pages."""
    try:
        return Path(str(resources.files("miniwob") / "html" / "miniwob"))
    except ModuleNotFoundError as exc:
        raise MissingDependencyError("miniwob", "miniwob") from exc


def available_tasks() -> list[str]:
    """Every MiniWoB++ task name the installed package ships."""
    return sorted(p.stem for p in miniwob_html_dir().glob("*.html"))


def quoted_fields(text: str) -> dict[str, str]:
    """Quoted substrings of a goal as parameters ``q0``, ``q1``, ... (when no task-specific extractor exists)."""
    return {f"q{i}": v for i, v in enumerate(_QUOTED.findall(text))}


def extract_fields(task_id: str, utterance: Any) -> tuple[str, dict[str, str]]:
    """A MiniWoB task's goal text and its parameters (MiniWoB's own field extractor when it has one)."""
    if isinstance(utterance, dict):
        return str(utterance.get("utterance", "")), {str(k): str(v) for k, v in utterance.get("fields", {}).items()}
    text = str(utterance)
    try:
        from miniwob.fields import get_field_extractor

        return text, {str(k): str(v) for k, v in get_field_extractor(task_id)(text)}
    except (KeyError, ValueError):
        return text, quoted_fields(text)


def _element(raw: dict[str, Any]) -> UIElement:
    try:
        role = Role(raw.get("role", "other"))
    except ValueError:
        role = Role.OTHER
    b = raw.get("bounds") or {}
    return UIElement(
        ref=str(raw["ref"]), role=role, text=raw.get("text") or "", label=raw.get("label") or "",
        resource_id=raw.get("resource_id") or "", value=raw.get("value"),
        bounds=Bounds(x=b.get("x", 0), y=b.get("y", 0), w=b.get("w", 0), h=b.get("h", 0)),
        clickable=bool(raw.get("clickable")), editable=bool(raw.get("editable")), checked=raw.get("checked"),
        focused=bool(raw.get("focused")), enabled=bool(raw.get("enabled", True)), container=raw.get("container") or "",
    )


def _observation(snapshot: dict[str, Any], screenshot: str | None = None) -> Observation:
    """A page snapshot as an observation; its location is the page's structure, never the task id (sibling
    tasks share their pages)."""
    elements = tuple(_element(raw) for raw in snapshot.get("elements", []))
    return Observation(app="miniwob", location=page_view(elements), elements=elements, screenshot=screenshot,
                       timestamp=time.time())


class MiniWoBEnv:
    """MiniWoB++ tasks as an `Env`.

    Args:
        settings: Browser binaries and the per-step settle time.
        screenshots_dir: When set, a PNG of every observation is written there.
    """

    def __init__(self, settings: BrowserSettings | None = None, screenshots_dir: Path | None = None) -> None:
        self.settings = settings or BrowserSettings()
        self.screenshots_dir = screenshots_dir
        self._shot_prefix = uuid.uuid4().hex[:8]  # envs sharing a folder (workers) never overwrite each other
        self._browser: Browser | None = None
        self._page: str | None = None
        self._task: Task | None = None
        self._snapshot: dict[str, Any] = {}
        self._obs_count = 0
        self._preview: Preview | None = None
        self._snapshot_ms = 0.0
        self._preview_ms = 0.0
        self._starts = StartMemo()
        self._html = miniwob_html_dir()
        self._devtools: tuple[Browser, DevToolsPage] | None = None

    @classmethod
    def from_settings(cls, settings: GuimemSettings, screenshots_dir: Path | None = None) -> MiniWoBEnv:
        """Build from the process settings."""
        return cls(settings.browser, screenshots_dir=screenshots_dir)

    @property
    def name(self) -> str:
        """``miniwob``."""
        return "miniwob"

    @property
    def task(self) -> Task:
        """The current, instantiated task."""
        if self._task is None:
            raise EnvError("no episode has started: call reset(task) first")
        return self._task

    @property
    def driver(self) -> Any:
        """The Selenium driver (the browser starts on first use)."""
        if self._browser is None or self._browser.closed:
            self._browser = launch_chrome(self.settings)
            self._page = None
        return self._browser.driver

    def preflight(self) -> str:
        """Start the browser this env will use and render a page in it.

        Raises:
            EnvNotReadyError: Chromium or chromedriver is missing.
            EnvError: The browser does not start or render.
        """
        start = time.perf_counter()
        if self._js("return 1 + 1;") != 2:
            raise EnvError("the browser does not run scripts")
        version = self.driver.capabilities.get("browserVersion", "?")
        return f"chromium {version} started in {time.perf_counter() - start:.2f}s"

    def _js(self, script: str, *args: Any) -> Any:
        from selenium.common.exceptions import WebDriverException

        try:
            return self.driver.execute_script(script, *args)
        except WebDriverException as exc:
            raise EnvError(f"browser script failed: {exc.msg}") from exc

    def _page_js(self, expression: str, await_promise: bool = False) -> Any:
        """The value of ``expression`` (a JSON text, or a promise of one) in the page, parsed, over the browser's
        DevTools (`DevToolsPage`): the snapshots, several ms faster a step than through WebDriver."""
        return self._page_text(expression, await_promise)[1]

    def _page_text(self, expression: str, await_promise: bool = False) -> tuple[str, Any]:
        """`_page_js`'s JSON text and its value."""
        driver = self.driver
        if self._devtools is None or self._devtools[0] is not self._browser:
            if self._devtools is not None:
                self._devtools[1].close()
            address = (driver.capabilities.get("goog:chromeOptions") or {}).get("debuggerAddress")
            if not address:
                raise EnvError("the browser gives no DevTools address (not Chromium?)")
            assert self._browser is not None  # `driver` started it
            self._devtools = (self._browser, DevToolsPage(address, driver.current_window_handle))
        text = self._devtools[1].evaluate(expression, await_promise)
        if not isinstance(text, str):
            return "", None
        try:
            return text, json.loads(text)
        except ValueError as exc:
            raise EnvError(f"the page's answer is not JSON: {exc}") from exc

    def _open(self, task_id: str) -> None:
        page = self._html / f"{task_id}.html"
        if not page.exists():
            import difflib

            close = difflib.get_close_matches(task_id, available_tasks(), n=3)
            raise SuiteError(f"unknown MiniWoB task {task_id!r}",
                             suggestion=f"did you mean {', '.join(close)}?" if close else "see `guimem suites`")
        if self._page != task_id:
            self.driver.get(page.as_uri())
            self._wait_for("return typeof core !== 'undefined' && !!document.getElementById('sync-task-cover');")
            self._preload_images()
            self._page = task_id

    def _preload_images(self, timeout_s: float = 3.0) -> None:
        """Load and decode every image the page's style sheets name before the first episode: an image shown
        through CSS (email-inbox's star and trash icons are ``content: url(...)``) has no size until it has
        loaded, so the first screen of a freshly opened page sometimes lacked those controls (a timing that
        differed between workers and runs). Best effort: an image that does not load is left as it is."""
        self._js(_PRELOAD_JS)
        deadline = time.monotonic() + timeout_s
        while self._js("return window.__guimemPreload;") and time.monotonic() < deadline:
            time.sleep(0.01)

    def _wait_for(self, condition: str, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._js(condition):
            if time.monotonic() > deadline:
                raise EnvError(f"page did not get ready ({condition})")
            time.sleep(0.02)

    def reset(self, task: Task) -> Observation:
        """Open the task page if needed, seed it, start an episode with the timer lifted."""
        with _browser_failures():
            return self._reset(task)

    def _reset(self, task: Task) -> Observation:
        self._open(task.id)
        self._js("if (WOB_DONE_GLOBAL === false && core.EP_TIMER !== null) { core.endEpisode(0); }")
        self._js(_FRESH_START_JS, task.seed)  # seeded after what the last episode left is cleared
        self._page_js(_QUIET_WATCH_JS)  # every reset: a page that reloaded itself has lost it
        self._wait_for("return WOB_TASK_READY;")
        goal, params = extract_fields(task.id, self._js("return core.getUtterance();"))
        self._task = task.model_copy(update={"goal": goal, "params": params, "app": "miniwob"})
        obs = self._observe()
        self._starts.remember(task, self._task, obs)
        return obs

    def expected_start(self, task: Task) -> tuple[Task, Observation] | None:
        """What the last reset with ``task`` returned (`ForeseeingStart`): a page seeded the same starts the same."""
        return self._starts.expected(task)

    def preview_to(self, callback: Preview | None) -> None:
        """Show ``callback``, early in every step's settle wait, the page as it is then (`Previewing`).

        The preview reads the page and changes nothing in it: an element that has no ref yet gets the one the
        settled snapshot would give it if the page did not change (MiniWoB++'s numbering worked out, not written),
        so a screen that did not change is the same screen, refs included, and memory's answer ahead holds for it;
        the page's own ref counter is left alone and no screenshot is taken, so a step returns the same observation
        with or without it."""
        self._preview = callback

    def _show_preview(self, settled: float) -> None:
        # a preview that cannot end before the settled snapshot starts (a snapshot as long as the last one, the work
        # after it as long as the last preview's, the margin) would push that one later: none this step. A long
        # snapshot (a date picker's 48 elements on a busy machine: 18 ms of a 30 ms wait) still leaves room for one.
        if self._preview is None:
            return
        if self._snapshot_ms + self._preview_ms + PREVIEW_MARGIN_MS <= (settled - time.perf_counter()) * 1000:
            self._preview_when_quiet(self._preview, settled)
        else:  # a preview's own time is measured only when one runs: halved at each skip, one slow preview (a
            # pause) does not keep them off for good
            self._preview_ms /= 2

    def _preview_when_quiet(self, callback: Preview, settled: float) -> None:
        """Preview once the page has gone quiet after the action (no DOM change, input, scroll, focus move or
        transition for `QUIET_MS`), or at the last moment a preview still ends before ``settled`` (when the
        settled snapshot starts, `time.perf_counter`): an action's effect often lands after the action's script
        has returned (a handler's timer, a widget's redraw), and a preview taken before it is of another screen."""
        # what a preview takes once the page is quiet: a snapshot (as the last settled one took), the work here
        # after it (parsing, the callback: as the last preview's took), and a margin for the page's timers
        cost_ms = self._snapshot_ms + self._preview_ms + PREVIEW_MARGIN_MS
        budget_ms = (settled - time.perf_counter()) * 1000 - cost_ms
        wait = f"{_QUIET_PREVIEW_FN}({float(QUIET_MS)!r}, {max(0.0, budget_ms)!r})"
        try:
            text, snapshot = self._page_text(wait, await_promise=True)
        except EnvError as exc:  # the page navigated meanwhile, say: a preview is only a head start; the settled
            # snapshot reports a browser that is really gone
            log.warning("no preview this step: %s", exc)
            return
        read = time.perf_counter()
        if isinstance(snapshot, dict):  # else the page lost its watch (reloaded): no preview this step
            preview = _observation(snapshot)
            note_source(preview, text)  # the settled screen's text is compared with it, not its elements
            show_preview(callback, preview)
        self._preview_ms = (time.perf_counter() - read) * 1000

    def _observe(self) -> Observation:
        started = time.perf_counter()
        text, self._snapshot = self._page_text(_SNAPSHOT_SETTLED)
        if not isinstance(self._snapshot, dict):
            raise EnvError("the page's snapshot is not an object")
        self._snapshot_ms = (time.perf_counter() - started) * 1000
        shot = None
        if self.screenshots_dir is not None:
            self.screenshots_dir.mkdir(parents=True, exist_ok=True)
            path = self.screenshots_dir / f"obs-{self._shot_prefix}-{self._obs_count:05d}.png"
            self.driver.save_screenshot(str(path))
            shot = str(path)
        self._obs_count += 1
        observation = _observation(self._snapshot, shot)
        note_source(observation, text)
        return observation

    def step(self, action: Action) -> Transition:
        """Perform a UI action; failures come back as `ActionError` (a dead browser raises `EnvError`)."""
        with _browser_failures():
            return self._step(action)

    def _step(self, action: Action) -> Transition:
        if self._snapshot.get("done"):
            err = ActionError(code=ActionErrorCode.ENV_REJECTED, message="the episode is over",
                              action=action.describe())
            return Transition(self._observe(), err, done=True)
        error = self._perform(action)
        if self.settings.step_wait_ms:
            settled = time.perf_counter() + self.settings.step_wait_ms / 1000
            self._show_preview(settled)  # memory embeds it while the page settles
            time.sleep(max(0.0, settled - time.perf_counter()))
        obs = self._observe()
        return Transition(obs, error, done=bool(self._snapshot.get("done")))

    def _perform(self, action: Action) -> ActionError | None:
        kind = action.kind
        if kind in (ActionKind.TAP, ActionKind.TYPE) and action.ref is None:
            return ActionError(code=ActionErrorCode.INVALID_ACTION, message="MiniWoB actions need a ref",
                               action=action.describe())
        if kind is ActionKind.TAP:
            return self._result(self._js(_TAP_JS, int(action.ref or 0)), action)
        if kind is ActionKind.TYPE:
            return self._type(action)
        if kind is ActionKind.KEY:
            return self._key(action)
        if kind is ActionKind.SCROLL:
            dy = {"up": -100, "down": 100}.get(action.direction or "down", 0)
            self._js("window.scrollBy(0, arguments[0]); var a = document.getElementById('area');"
                     "if (a) a.scrollTop += arguments[0];", dy)
            return None
        if kind is ActionKind.WAIT:
            time.sleep(0.5)
            return None
        return ActionError(code=ActionErrorCode.UNSUPPORTED, message=f"MiniWoB has no {kind.value} action",
                           action=action.describe())

    def _result(self, result: Any, action: Action) -> ActionError | None:
        if result is True:
            return None
        return ActionError(code=ActionErrorCode.NO_SUCH_ELEMENT, message=str(result), action=action.describe())

    def _type(self, action: Action) -> ActionError | None:
        from miniwob.selenium_actions import execute_type_text

        ref = int(action.ref or 0)
        err = self._result(self._js(_TAP_JS, ref), action) or self._result(self._js(_CLEAR_JS, ref), action)
        if err is not None:
            return err.model_copy(update={"code": ActionErrorCode.NOT_EDITABLE}) if "editable" in err.message else err
        execute_type_text(action.text or "", self.driver)
        return None

    def _key(self, action: Action) -> ActionError | None:
        from miniwob.selenium_actions import execute_press_key

        name = (action.key or "").lower()
        key = KEYS.get(name, action.key if len(action.key or "") == 1 else None)
        if key is None:
            return ActionError(code=ActionErrorCode.INVALID_ACTION, message=f"unknown key {action.key!r}",
                               action=action.describe())
        execute_press_key(key, self.driver)
        return None

    def evaluate(self) -> Outcome:
        """Raw reward 1 is success; an episode that has not ended is not a success."""
        with _browser_failures():
            snap = self._js("return {done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON};")
        if not snap["done"]:
            return Outcome(success=False, score=0.0, reason="episode did not end")
        raw = float(snap["raw"] or 0.0)
        return Outcome(success=raw >= 1.0 - 1e-9, score=raw, reason=str(snap["reason"] or ""))

    def close(self) -> None:
        """Quit the browser (a later reset starts another and opens its page again)."""
        if self._devtools is not None:
            self._devtools[1].close()
            self._devtools = None
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        self._page = None


def _script(name: str) -> str:
    return Path(__file__).with_name(name).read_text(encoding="utf-8")


_SNAPSHOT_JS = _script("miniwob_snapshot.js")
_FRESH_START_JS = _script("miniwob_fresh_start.js")  # a seeded episode that starts as on a freshly opened page
_QUIET_WATCH_JS = _script("miniwob_quiet_watch.js")  # the time of the page's last change, kept by the page
_PRELOAD_JS = _script("miniwob_preload.js")  # every image the style sheets name, loaded and decoded

QUIET_MS = 4.0
"""A page with no change for this long after an action is taken to have settled, for the preview."""
PREVIEW_MARGIN_MS = 4.0
"""What a preview leaves free before the settled snapshot, beyond the time a snapshot or preview last took."""
# The snapshot script as a function (its first argument says a preview), for expressions (`MiniWoBEnv._page_js`)
_SNAPSHOT_FN = "(function () {\n" + _SNAPSHOT_JS + "\n})"
_SNAPSHOT_SETTLED = "JSON.stringify(" + _SNAPSHOT_FN + ".call(null, false))"  # text: 2x faster than by value
# A function of (quiet ms, most ms to wait): wait until the page has had no change for that long, or for the most,
# then take the preview snapshot; a promise of its JSON text (null when the page has no watch).
_QUIET_PREVIEW_FN = """
(function (quiet, budget) {
  var q = window.__guimemQuiet, start = performance.now();
  if (!q) return Promise.resolve('null');
  return new Promise(function (done) {
    (function check() {
      var now = performance.now(), idle = now - q.last, left = budget - (now - start);
      if (idle >= quiet || left <= 4) {  // a nested timer may fire 4 ms late: none that could overrun
        done(JSON.stringify(SNAPSHOT.call(null, true)));
        return;
      }
      setTimeout(check, Math.max(0, Math.min(quiet - idle, left)));
    })();
  });
})""".replace("SNAPSHOT", _SNAPSHOT_FN)
