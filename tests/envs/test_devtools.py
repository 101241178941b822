"""The DevTools connection MiniWoB++'s env reads its snapshots over (`guimem.envs.browser.DevToolsPage`)."""

from __future__ import annotations

import pytest

from guimem.envs.browser import DevToolsPage
from guimem.envs.miniwob import _SNAPSHOT_FN, _SNAPSHOT_JS, MiniWoBEnv, _observation
from guimem.errors import EnvError
from guimem.types import Task

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def env():
    e = MiniWoBEnv()
    yield e
    e.close()


def _page(env: MiniWoBEnv) -> DevToolsPage:
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
