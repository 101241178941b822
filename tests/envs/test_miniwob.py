"""MiniWoB++ in real headless Chromium (Debian's chromium + chromedriver, installed by `make setup`)."""

from __future__ import annotations

import pytest

from guimem.envs.browser import DevToolsPage
from guimem.envs.miniwob import _SNAPSHOT_FN, _SNAPSHOT_JS, MiniWoBEnv, _observation, available_tasks
from guimem.errors import EnvError, SuiteError
from guimem.testing import check_env
from guimem.types import Action, ActionErrorCode, ActionKind, Role, Selector, Task

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env():
    e = MiniWoBEnv()
    yield e
    e.close()


def task(name: str, seed: int = 1) -> Task:
    return Task(id=name, goal="", app="miniwob", seed=seed)


def tap(obs, **sel) -> Action:
    el = Selector(**sel).resolve(obs).element
    assert el is not None, f"{sel} not on screen: {[(e.role, e.text, e.label) for e in obs.elements]}"
    return Action(kind=ActionKind.TAP, ref=el.ref)


def test_miniwob_env_passes_the_env_contract():
    env = MiniWoBEnv()
    assert check_env(env, task("click-button")) == []


def test_task_fields_become_params_and_the_goal(env):
    env.reset(task("login-user", 3))
    assert set(env.task.params) == {"username", "password"}
    assert env.task.params["username"] in env.task.goal


def test_same_seed_same_task_other_seed_other_values(env):
    env.reset(task("login-user", 3))
    first = dict(env.task.params)
    env.reset(task("login-user", 3))
    assert env.task.params == first
    env.reset(task("login-user", 4))
    assert env.task.params != first


@pytest.mark.parametrize("task_id", ["login-user", "email-inbox-forward-nl", "book-flight"])
def test_the_start_it_foresees_is_the_one_a_reset_with_the_same_seed_returns(env, task_id):
    """`expected_start` guesses from the last reset of the same task: after another task (or another seed of it)
    and an action on the page, a reset with that seed again starts on the same screen, refs and all."""
    from guimem.types.ui import same_screen

    assert env.expected_start(task(task_id, 17)) is None  # never started
    first = env.reset(task(task_id, 17))
    started = env.task
    env.step(Action(kind=ActionKind.TAP, ref=first.elements[-1].ref))
    env.reset(task(task_id, 18))
    env.reset(task("click-button", 17))
    guess = env.expected_start(task(task_id, 17))
    assert guess is not None and guess[0] == started
    again = env.reset(task(task_id, 17))
    assert guess[0] == env.task and same_screen(guess[1], again)


@pytest.mark.parametrize("task_id", ["click-checkboxes", "search-engine", "book-flight"])
def test_a_seeded_start_is_the_same_whatever_the_last_episode_did(env, task_id):
    """What the last episode left on the page is not carried into the next: a focused field (search-engine), refs
    given after the last episode ended (click-checkboxes' Submit), a date picker still fading out (book-flight)."""
    from guimem.types.ui import same_screen, screen_key

    env.reset(task(task_id, 1))
    untouched = env.reset(task(task_id, 2))
    first = env.reset(task(task_id, 1))
    for el in first.elements[:6]:
        env.step(Action(kind=ActionKind.TAP, ref=el.ref))
    fields = [el for el in first.elements if el.role == "textbox"]
    if fields:
        env.step(Action(kind=ActionKind.TYPE, ref=fields[0].ref, text="abc"))
    # the page is left as the next reset must not show it: a field focused, the episode over (refs given under
    # the next one's id), or a date picker open
    assert env._js("return document.activeElement !== document.body || WOB_DONE_GLOBAL === true || "
                   "!!(window.jQuery && jQuery('#ui-datepicker-div:visible').length);")
    after = env.reset(task(task_id, 2))
    assert same_screen(untouched, after), [(a, b) for a, b in zip(screen_key(untouched), screen_key(after),
                                                                   strict=False) if a != b][:2]


def test_login_user_succeeds_with_the_right_actions(env):
    obs = env.reset(task("login-user", 5))
    params = env.task.params
    user = Selector(role=Role.TEXTBOX, resource_id="username").resolve(obs).element
    pw = Selector(role=Role.TEXTBOX, resource_id="password").resolve(obs).element
    assert not env.step(Action(kind=ActionKind.TYPE, ref=user.ref, text=params["username"])).done
    result = env.step(Action(kind=ActionKind.TYPE, ref=pw.ref, text=params["password"]))
    assert result.observation.element(pw.ref).value == params["password"]
    result = env.step(tap(result.observation, role=Role.BUTTON, text="Login"))
    assert result.done
    outcome = env.evaluate()
    assert outcome.success and outcome.score == 1.0


def test_wrong_submission_is_a_failure_with_negative_score(env):
    obs = env.reset(task("login-user", 5))
    assert env.step(tap(obs, role=Role.BUTTON, text="Login")).done
    outcome = env.evaluate()
    assert not outcome.success and outcome.score < 0


def test_select_an_option_from_a_list(env):
    obs = env.reset(task("choose-list", 2))
    target = env.task.params["target"]
    obs = env.step(tap(obs, role=Role.OPTION, text=target)).observation
    env.step(tap(obs, role=Role.BUTTON, text="Submit"))
    assert env.evaluate().success


def test_the_in_page_timer_is_lifted(env):
    env.reset(task("click-button"))
    assert env.driver.execute_script("return core.EPISODE_MAX_TIME;") >= 1e8


def test_bad_ref_and_unknown_key_are_action_errors(env):
    env.reset(task("click-button"))
    assert env.step(Action(kind=ActionKind.TAP, ref="987654")).error.code is ActionErrorCode.NO_SUCH_ELEMENT
    assert env.step(Action(kind=ActionKind.KEY, key="hyperspace")).error.code is ActionErrorCode.INVALID_ACTION


def test_unknown_task_suggests_close_names(env):
    with pytest.raises(SuiteError, match="did you mean click-test-2"):
        env.reset(task("click-tst-2"))


def test_screenshots_are_written_when_asked(tmp_path):
    env = MiniWoBEnv(screenshots_dir=tmp_path)
    try:
        obs = env.reset(task("click-test-2"))
    finally:
        env.close()
    (shot,) = tmp_path.glob("obs-*-00000.png")  # named per env: workers sharing a folder never collide
    assert obs.screenshot == str(shot) and shot.read_bytes()[:4] == b"\x89PNG"


def test_available_tasks_lists_the_package_pages():
    names = available_tasks()
    assert "login-user" in names and "email-inbox" in names and len(names) > 100


def test_a_reset_after_close_starts_a_browser_and_opens_the_page_again():
    env = MiniWoBEnv()
    try:
        env.reset(task("login-user", 3))
        env.close()
        assert env.reset(task("login-user", 3)).elements, "before: the new browser's blank page had no task"
    finally:
        env.close()


def test_a_freshly_opened_page_shows_the_controls_its_style_sheets_draw_from_its_first_screen():
    """email-inbox draws its star and trash icons with CSS ``content: url(...)``: before their images load
    they have no size, and the first screen of a freshly opened page sometimes lacked them (a timing that
    differed between workers). The page's style-sheet images are loaded and decoded before the first episode."""
    for _ in range(2):  # a new browser each time: nothing cached
        env = MiniWoBEnv()
        try:
            obs = env.reset(task("email-inbox", 501))
            assert env._js("return window.__guimemImages.length;") >= 3  # star, star-clicked, delete
            assert env._js("return window.__guimemImages.every(i => i.complete && i.naturalWidth > 0);")
            labels = [e.label for e in obs.elements if e.role is Role.BUTTON]
            assert labels.count("star") == labels.count("trash") > 0, labels
        finally:
            env.close()


def test_a_slow_snapshot_leaves_room_for_a_preview_unless_one_cannot_end_before_the_settled_one(monkeypatch):
    """A date picker's 48 elements took 18 ms to read on a busy machine, of a 30 ms settle wait: a preview (its
    snapshot as long, the work after it, the margin) still ends in time; one as long as the whole wait would push the
    settled snapshot later, so there is none. One slow preview does not keep them off for good. No browser: the
    rule reads only what the last snapshot and preview took, and the time left (a clock stopped here)."""
    from guimem.settings import BrowserSettings

    env = MiniWoBEnv(BrowserSettings(step_wait_ms=30))
    shown: list[float] = []
    monkeypatch.setattr(MiniWoBEnv, "_preview_when_quiet", lambda self, callback, settled: shown.append(settled))
    monkeypatch.setattr("guimem.envs.miniwob.time.perf_counter", lambda: 100.0)
    env.preview_to(lambda obs: None)
    settled = 100.0 + 30 / 1000
    for snapshot_ms, preview_ms, previewed in ((18.0, 0.5, True), (30.0, 0.5, False), (5.0, 40.0, False)):
        env._snapshot_ms, env._preview_ms = snapshot_ms, preview_ms
        shown.clear()
        env._show_preview(settled)
        assert bool(shown) is previewed, (snapshot_ms, preview_ms)
    shown.clear()
    for _ in range(4):  # the last preview took 40 ms (a pause): skipped, then tried again
        env._show_preview(settled)
    assert shown


@pytest.mark.parametrize("task_id", ["click-collapsible-2", "use-autocomplete", "click-tab-2", "enter-text"])
def test_a_preview_changes_nothing_the_step_returns_and_often_is_the_settled_screen(env, task_id, monkeypatch):
    from guimem.agents.explorer import ExplorerPolicy
    from guimem.harness.episode import run_episode
    from guimem.types import Task, screen_signature

    def always(self, settled) -> None:  # the env skips a preview that cannot end before the settled snapshot (a
        # loaded machine's snapshot can take most of the wait): here every step previews, so the rule cannot decide
        # whether one is checked
        if self._preview is not None:
            self._preview_when_quiet(self._preview, settled)

    monkeypatch.setattr(type(env), "_show_preview", always)

    def screens(traj):  # bounds and refs apart: an animation's frame and the page's ref numbering vary between
        # two episodes of one seed without preview too (the page's own refs are checked below)
        return [(s.action.describe(), [e.model_dump(exclude={"bounds", "ref"}) for e in s.observation.elements],
                 s.observation.location) for s in traj.steps]

    task = Task(id=task_id, goal="", app="miniwob", seed=3, max_steps=8)
    env.preview_to(None)
    run_episode(env, ExplorerPolicy(seed=5), task)  # the page's first episode numbers its refs otherwise
    plain = run_episode(env, ExplorerPolicy(seed=5), task)
    previews: list = []
    env.preview_to(previews.append)
    try:
        ahead = run_episode(env, ExplorerPolicy(seed=5), task)
    finally:
        env.preview_to(None)
    assert screens(ahead) == screens(plain)
    assert ahead.outcome.success == plain.outcome.success
    assert 0 < len(previews) <= len(ahead.steps)  # one per env step, none for the reset
    settled = [s.observation for s in ahead.steps[1:]] + [ahead.final_observation]
    hits = sum(screen_signature(p) == screen_signature(o) for p, o in zip(previews, settled, strict=False))
    assert hits >= 1


def test_a_preview_leaves_the_pages_refs_alone_and_foresees_the_ones_it_will_give(env):
    from guimem.envs.miniwob import _SNAPSHOT_JS, _observation
    from guimem.types.ui import same_screen

    state = ("return [core.nextRefCode, document.querySelectorAll('[data-wob_ref]').length, "
             "Object.keys(core.previousDOMInfo).length];")
    obs = env.reset(task("use-autocomplete", 2))
    box = next(el for el in obs.elements if el.role is Role.TEXTBOX)
    env._perform(Action(kind=ActionKind.TYPE, ref=box.ref, text=obs.elements[0].text[:1] or "a"))
    import time

    time.sleep(0.3)  # the suggestions are on the page, without refs yet
    before = env._js(state)
    preview = _observation(env._js(_SNAPSHOT_JS, True))
    assert env._js(state) == before
    known = {e.ref for e in obs.elements}
    settled = env._observe()
    assert env._js(state)[0] > before[0]  # the real snapshot numbers them
    assert any(e.ref not in known for e in settled.elements), "no element was new: the case did not happen"
    # the refs the preview foresaw are the ones the page gave: the same screen (the answer ahead holds)
    assert [e.model_dump(exclude={"bounds"}) for e in preview.elements] == \
        [e.model_dump(exclude={"bounds"}) for e in settled.elements]
    assert same_screen(preview, settled)



# a button whose click changes its text 15 times, 2 ms apart: what a widget's redraw does after the click returned
_LATE_BUTTON_JS = """
var b = document.createElement('button');
b.textContent = 'later';
b.onclick = function () {
  var n = 0;
  (function next() { b.textContent = 'changed ' + 'abcdefghijklmno'[n++]; if (n < 15) setTimeout(next, 2); })();
};
document.getElementById('area').appendChild(b);
"""


@pytest.mark.parametrize("quiet_ms", [0.0, 20.0])
def test_a_preview_waits_for_the_changes_an_action_makes_after_its_script_returned(env, monkeypatch, quiet_ms):
    """A click whose handler goes on changing the page for ~30 ms (timers, as widgets' redraws do): the preview
    waits for the page to go quiet, so it shows the screen the step returns; without the wait (quiet 0 ms, the
    old preview at the start of the settle wait) it showed a screen before the last change. A long settle wait
    here, so that a loaded machine's late timers cannot decide the outcome."""
    from guimem.envs import miniwob as mw
    from guimem.types import screen_signature, ui

    monkeypatch.setattr(mw, "QUIET_MS", quiet_ms)
    monkeypatch.setattr(env.settings, "step_wait_ms", 300)
    env.reset(task("enter-text", 7))
    env._js(_LATE_BUTTON_JS)
    button = next(e for e in env._observe().elements if e.text == "later")
    previews: list = []
    env._snapshot_ms = 0.0  # the rule that skips a preview after a slow snapshot is not what is checked here
    env.preview_to(previews.append)
    try:
        step = env.step(Action(kind=ActionKind.TAP, ref=button.ref))
    finally:
        env.preview_to(None)
    assert any(e.text == "changed o" for e in step.observation.elements)
    assert len(previews) == 1
    assert (screen_signature(previews[0]) == screen_signature(step.observation)) is (quiet_ms > 0)
    # both read over DevTools as the same text when the screen is the same: same_screen compares the texts
    assert (ui.noted_source(previews[0]) == ui.noted_source(step.observation) is not None) is (quiet_ms > 0)


def test_a_page_that_never_goes_quiet_is_previewed_before_the_settled_snapshot_all_the_same(env, monkeypatch):
    """The wait for quiet is bounded by the settle wait: a page changing every ms is still previewed, once, and
    the step returns (an unbounded wait would end in the script timeout, an `EnvError`)."""
    env.reset(task("enter-text", 8))
    env._js("window.__busy = setInterval(function () { document.body.dataset.tick = Date.now(); }, 1);")
    box = next(e for e in env._observe().elements if e.role is Role.TEXTBOX)
    order: list[str] = []
    observe = type(env)._observe
    monkeypatch.setattr(type(env), "_observe", lambda self: order.append("settled") or observe(self))
    env._snapshot_ms = 0.0
    env.preview_to(lambda o: order.append("preview"))
    try:
        env.step(Action(kind=ActionKind.TAP, ref=box.ref))
    finally:
        env.preview_to(None)
        env._js("clearInterval(window.__busy);")
    assert order == ["preview", "settled"]


def test_a_preview_that_fails_is_left_out_and_the_step_goes_on(env, monkeypatch):
    """A preview is only a head start: when its script fails (the page navigated while it waited, say) the step
    returns the settled screen as without previews; a page that reloaded itself gets its watch again at reset."""
    from guimem.errors import EnvError

    env.reset(task("enter-text", 9))
    env._js("location.reload();")
    env._wait_for("return typeof core !== 'undefined' && !!document.getElementById('sync-task-cover');")
    assert env._js("return !window.__guimemQuiet;")  # the reload dropped the watch
    obs = env.reset(task("enter-text", 9))
    assert env._js("return !!window.__guimemQuiet;")  # the reset put it back
    box = next(e for e in obs.elements if e.role is Role.TEXTBOX)
    page_text = type(env)._page_text

    def failing(self, expression, await_promise=False):
        if await_promise:
            raise EnvError("browser script failed: Inspected target navigated or closed")
        return page_text(self, expression, await_promise)

    monkeypatch.setattr(type(env), "_page_text", failing)
    previews: list = []
    env._snapshot_ms = 0.0
    env.preview_to(previews.append)
    try:
        step = env.step(Action(kind=ActionKind.TAP, ref=box.ref))
    finally:
        env.preview_to(None)
    assert step.error is None and step.observation.elements and previews == []


# ---- the DevTools connection the env reads its snapshots over (`guimem.envs.browser.DevToolsPage`)

def _page(env: MiniWoBEnv) -> DevToolsPage:  # connected
    env._page_js("1")  # connects
    assert env._devtools is not None
    return env._devtools[1]


def test_a_snapshot_over_devtools_is_the_one_webdriver_reads(env):
    env.reset(Task(id="book-flight", goal="", app="miniwob", seed=4))
    over_webdriver = _observation(env._js(_SNAPSHOT_JS, True))
    over_devtools = _observation(env._page_js(f"JSON.stringify({_SNAPSHOT_FN}.call(null, true))"))
    assert over_devtools.elements == over_webdriver.elements and len(over_devtools.elements) > 3


def test_what_a_script_throws_or_returns_that_is_not_json_is_an_env_error(env):
    env.reset(Task(id="enter-text", goal="", app="miniwob", seed=1))
    page = _page(env)
    assert page.evaluate("({a: [1, 'x', null], b: true})") == {"a": [1, "x", None], "b": True}
    with pytest.raises(EnvError, match="boom"):
        page.evaluate("(function () { throw new Error('boom'); })()")
    with pytest.raises(EnvError, match="browser script failed"):
        page.evaluate("new Promise(function (_, no) { no(new Error('refused')); })", await_promise=True)
    with pytest.raises(EnvError, match="not JSON"):
        env._page_js("'{not json'")


def test_a_devtools_address_off_loopback_is_refused_before_any_connection():
    for address in ("10.0.0.1:9222", "example.com:9222", "localhost:http", "[::1]:9222"):
        with pytest.raises(EnvError, match="loopback"):
            DevToolsPage(address, "target")


def test_a_closed_browser_is_an_env_error_and_the_next_reset_starts_another(env):
    env.reset(Task(id="enter-text", goal="", app="miniwob", seed=2))
    page = _page(env)
    assert env._browser is not None
    env._browser.driver.quit()  # the browser dies under the env (a crash)
    with pytest.raises(EnvError):
        page.evaluate("1")
    env.close()  # as the harness does after an infrastructure failure
    obs = env.reset(Task(id="enter-text", goal="", app="miniwob", seed=2))  # a new browser, a new connection
    assert obs.elements and env._devtools is not None and env._devtools[1] is not page
