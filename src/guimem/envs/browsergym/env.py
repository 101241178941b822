"""BrowserGym benchmarks (MiniWoB++, WebArena, WorkArena, ...) as a guimem `Env`.

- Drives BrowserGym's own gymnasium env and judges by its own task reward (success: reward ≥ 1).
- Observations are read by `guimem.envs.browsergym.observation` (accessibility tree + DOM, refs are
  bids); guimem actions become BrowserGym action strings by `guimem.envs.browsergym.actions`
  (``click('12')``, ``fill('12', 'text')``, ...).
- Playwright drives Debian's ``chromium``: nothing is downloaded. BrowserGym launches two browsers
  (the page and its chat window), the second without our launch options, so guimem points
  ``PLAYWRIGHT_BROWSERS_PATH`` at a cache folder where Playwright's expected Chromium path is a
  symlink to Debian's binary (only when Playwright's own browser is not installed).
- MiniWoB++ pages come from the installed ``miniwob`` package (``MINIWOB_URL`` is set when unset).
  Other benchmarks need their servers; a missing URL variable is named in the error.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from guimem.envs.base import Transition
from guimem.envs.browser import INSTALL_HINT, resolve_binary
from guimem.envs.browsergym.actions import UnmappableActionError, to_browsergym
from guimem.envs.browsergym.observation import Parsed, parse_observation
from guimem.envs.browsergym.tasks import benchmark_of, check_benchmark, goal_and_params, gym_id, normalise_task_id
from guimem.errors import EnvError, EnvNotReadyError, MissingDependencyError, SuiteError
from guimem.settings import BrowserSettings, GuimemSettings
from guimem.types import Action, ActionError, ActionErrorCode, Observation, Outcome, Task

log = logging.getLogger(__name__)


_USERS = 0  # BrowserGym envs of this process holding BrowserGym's global Playwright


def _release_playwright() -> None:
    """Stop BrowserGym's global Playwright once no env of this process uses it: its event loop stays
    registered as running in this thread until stopped, and ``asyncio.run`` here would then fail."""
    if _USERS > 0:
        return
    try:
        import browsergym.core as core
    except ModuleNotFoundError:
        return
    pw = core._PLAYWRIGHT
    if pw is not None:
        core._set_global_playwright(None)
        try:
            pw.stop()
        except Exception:  # already gone with its driver; nothing else to release
            log.warning("BrowserGym's Playwright did not stop cleanly", exc_info=True)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "guimem" / "playwright"


def playwright_chromium_revision() -> str:
    """The Chromium revision the installed Playwright expects (from its ``browsers.json``)."""
    try:
        import playwright
    except ModuleNotFoundError as exc:
        raise MissingDependencyError("playwright", "browsergym") from exc
    path = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    try:
        browsers = json.loads(path.read_text(encoding="utf-8"))["browsers"]
        return str(next(b["revision"] for b in browsers if b["name"] == "chromium"))
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        raise EnvError(f"cannot read Playwright's browser list {path}: {exc}") from exc


def use_system_chromium(chrome_binary: str) -> str:
    """Make Playwright's default Chromium launch run ``chrome_binary``; returns the browsers folder used.

    Leaves things alone when Playwright's own Chromium is installed where it looks for it.

    Raises:
        EnvNotReadyError: ``chrome_binary`` is not installed.
    """
    chrome = resolve_binary(chrome_binary)
    if chrome is None:
        raise EnvNotReadyError(f"chromium not found ({chrome_binary})", suggestion=INSTALL_HINT)
    revision = playwright_chromium_revision()
    current = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache" / "ms-playwright")
    expected = Path(current) / f"chromium-{revision}" / "chrome-linux" / "chrome"
    if expected.exists():
        return current
    folder = _cache_dir()
    link = folder / f"chromium-{revision}" / "chrome-linux" / "chrome"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists() or link.resolve() != Path(chrome).resolve():
        tmp = link.with_name(f".chrome-{uuid.uuid4().hex[:8]}")
        tmp.symlink_to(chrome)
        os.replace(tmp, link)  # atomic: workers starting together never see a half-made link
    os.environ["PLAYWRIGHT_BROWSERS_PATH"] = str(folder)
    return str(folder)


@contextmanager
def _playwright_failures() -> Iterator[None]:
    """A browser that crashed or closed, or a Playwright transport error, is infrastructure (`EnvError`)."""
    try:
        yield
    except (EnvError, SuiteError, MissingDependencyError):
        raise
    except Exception as exc:  # Playwright raises its own Error types, and gymnasium wraps some of them
        module = type(exc).__module__
        if not (module.startswith("playwright") or module.startswith("greenlet") or isinstance(exc, OSError)):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise EnvError(f"the browser failed: {type(exc).__name__}: {first}",
                       suggestion="check `guimem doctor`; the episode is run again on resume") from exc


class BrowserGymEnv:
    """Any registered BrowserGym task as an `Env` (task ids ``miniwob.click-test-2``, ``click-test-2``,
    ``webarena.310``; MiniWoB's are normalised to the bare name, as guimem's ``miniwob`` env names them).

    Args:
        settings: The Chromium binary and headless mode.
        screenshots_dir: When set, a PNG of every observation is written there.
        pre_observation_delay: Seconds BrowserGym waits after an action before observing (its default 0.5).
    """

    def __init__(self, settings: BrowserSettings | None = None, screenshots_dir: Path | None = None,
                 pre_observation_delay: float = 0.5) -> None:
        self.settings = settings or BrowserSettings()
        self.screenshots_dir = screenshots_dir
        self.pre_observation_delay = pre_observation_delay
        self._shot_prefix = uuid.uuid4().hex[:8]
        self._gym: Any = None
        self._gym_task: str | None = None
        self._task: Task | None = None
        self._parsed: Parsed | None = None
        self._reward = 0.0
        self._done = False
        self._info: dict[str, Any] = {}
        self._obs_count = 0
        self._holds = False

    @classmethod
    def from_settings(cls, settings: GuimemSettings, screenshots_dir: Path | None = None) -> BrowserGymEnv:
        """Build from the process settings."""
        return cls(settings.browser, screenshots_dir=screenshots_dir)

    @property
    def name(self) -> str:
        """``browsergym``."""
        return "browsergym"

    @property
    def task(self) -> Task:
        """The current, instantiated task."""
        if self._task is None:
            raise EnvError("no episode has started: call reset(task) first")
        return self._task

    @property
    def gym_env(self) -> Any:
        """BrowserGym's own env of the current task (None before the first reset)."""
        return self._gym

    def preflight(self) -> str:
        """Check Playwright can launch Debian's chromium, by opening a blank page in it."""
        folder = use_system_chromium(self.settings.chrome_binary)
        start = time.perf_counter()
        check_benchmark("miniwob")
        with _playwright_failures():
            from browsergym.core import _get_global_playwright  # the one Playwright BrowserGym itself uses

            browser = _get_global_playwright().chromium.launch(headless=True)
            version = browser.version
            browser.close()
        _release_playwright()
        return f"playwright drives chromium {version} ({folder}) in {time.perf_counter() - start:.2f}s"

    def _make(self, task_id: str) -> Any:
        benchmark = benchmark_of(task_id)
        check_benchmark(benchmark)
        use_system_chromium(self.settings.chrome_binary)
        import gymnasium as gym
        from browsergym.core.action.highlevel import HighLevelActionSet

        actions = HighLevelActionSet(subsets=["bid", "coord", "nav"], multiaction=False, strict=False)
        name = gym_id(task_id)
        try:
            return gym.make(name, headless=self.settings.headless, action_mapping=actions.to_python_code,
                            pre_observation_delay=self.pre_observation_delay,
                            pw_chromium_kwargs={"executable_path": resolve_binary(self.settings.chrome_binary)})
        except gym.error.Error as exc:
            raise SuiteError(f"BrowserGym has no task {name!r}: {exc}",
                             suggestion="see `guimem suites --tasks` (miniwob) or the benchmark's task list") from None

    def reset(self, task: Task) -> Observation:
        """Start ``task`` with ``seed``: BrowserGym opens a fresh browser context for every episode."""
        task_id = normalise_task_id(task.id)
        with _playwright_failures():
            if self._gym is None or self._gym_task != task_id:
                self._close_gym()
                self._gym = self._make(task_id)
                self._gym_task = task_id
            self._hold()
            obs, info = self._gym.reset(seed=task.seed)
        self._reward, self._done, self._info = 0.0, False, dict(info) if isinstance(info, dict) else {}
        goal, params = goal_and_params(task_id, obs)
        self._task = task.model_copy(update={"id": task_id, "goal": goal, "params": params,
                                             "app": benchmark_of(task_id)})
        return self._observe(obs)

    def _observe(self, obs: dict[str, Any]) -> Observation:
        shot = None
        if self.screenshots_dir is not None and obs.get("screenshot") is not None:
            from PIL import Image

            self.screenshots_dir.mkdir(parents=True, exist_ok=True)
            path = self.screenshots_dir / f"obs-{self._shot_prefix}-{self._obs_count:05d}.png"
            Image.fromarray(obs["screenshot"]).save(path)
            shot = str(path)
        self._obs_count += 1
        self._parsed = parse_observation(obs, app=self.task.app, screenshot=shot, timestamp=time.time())
        return self._parsed.observation

    def step(self, action: Action) -> Transition:
        """Perform ``action``; BrowserGym's action errors come back as `ActionError`."""
        if self._gym is None or self._parsed is None:
            raise EnvError("no episode has started: call reset(task) first")
        if self._done:
            err = ActionError(code=ActionErrorCode.ENV_REJECTED, message="the episode is over",
                              action=action.describe())
            return Transition(self._parsed.observation, err, done=True)
        try:
            command = to_browsergym(action, self._parsed)
        except UnmappableActionError as exc:
            code = ActionErrorCode.NOT_EDITABLE if "editable" in str(exc) else (
                ActionErrorCode.NO_SUCH_ELEMENT if "no element" in str(exc) else ActionErrorCode.UNSUPPORTED)
            return Transition(self._parsed.observation,
                              ActionError(code=code, message=str(exc), action=action.describe()))
        with _playwright_failures():
            obs, reward, terminated, truncated, info = self._gym.step(command)
        self._reward = float(reward or 0.0)
        self._done = bool(terminated or truncated)
        self._info = dict(info) if isinstance(info, dict) else {}
        observation = self._observe(obs)
        message = obs.get("last_action_error") if isinstance(obs.get("last_action_error"), str) else ""
        error = None
        if message.strip():
            first = message.strip().splitlines()[0][:300]
            error = ActionError(code=ActionErrorCode.ENV_REJECTED, message=first, action=action.describe())
        return Transition(observation, error, done=self._done)

    def evaluate(self) -> Outcome:
        """BrowserGym's reward: 1 is success; an episode that has not ended is not a success."""
        if not self._done:
            return Outcome(success=False, score=0.0, reason="episode did not end")
        task_info = self._info.get("task_info") if isinstance(self._info.get("task_info"), dict) else {}
        reason = task_info.get("REWARD_REASON") if isinstance(task_info, dict) else None
        return Outcome(success=self._reward >= 1.0 - 1e-9, score=max(-1.0, min(1.0, self._reward)),
                       reason=str(reason or f"reward {self._reward:g}")[:300])

    def _hold(self) -> None:
        """Count this env among the users of BrowserGym's global Playwright (started by its reset)."""
        global _USERS
        if not self._holds:
            _USERS += 1
            self._holds = True

    def _close_gym(self) -> None:
        if self._gym is not None:
            gym_env, self._gym, self._gym_task = self._gym, None, None
            try:
                gym_env.close()
            except Exception:  # the browser may already be gone; nothing else to do
                log.warning("BrowserGym's env did not close cleanly", exc_info=True)

    def close(self) -> None:
        """Close BrowserGym's env and its browsers, and BrowserGym's Playwright when no other env of this
        process uses it (idempotent)."""
        global _USERS
        self._close_gym()
        if self._holds:
            self._holds = False
            _USERS -= 1
            _release_playwright()
