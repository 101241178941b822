"""MiniWoB++ pages for a browser-use agent: served over HTTP on 127.0.0.1 (browser-use refuses ``file://``
pages), an episode started with guimem's seeding, and a checker that reads the page's own reward."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from guimem.envs.miniwob import extract_fields, miniwob_html_dir
from guimem.errors import EnvError
from guimem.types import Task

_READY = "() => typeof core !== 'undefined' && !!document.getElementById('sync-task-cover')"
_START = ("(seed) => { if (WOB_DONE_GLOBAL === false && core.EP_TIMER !== null) { core.endEpisode(0); } "
          "Math.seedrandom(seed); core.setDataMode('train'); core.EPISODE_MAX_TIME = 1e9; core.startEpisodeReal(); "
          "return core.getUtterance(); }")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def serve_miniwob() -> Iterator[str]:
    """The ``miniwob`` package's pages on ``http://127.0.0.1:<port>/miniwob/`` for the block's duration."""
    handler = functools.partial(_Quiet, directory=str(miniwob_html_dir().parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/miniwob/"
    finally:
        server.shutdown()
        server.server_close()


async def _until(page: Any, script: str, timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while await page.evaluate(script) != "True":
        if asyncio.get_running_loop().time() > deadline:
            raise EnvError(f"MiniWoB page did not get ready ({script})")
        await asyncio.sleep(0.05)


async def start_episode(session: Any, base_url: str, task_id: str, seed: int = 0) -> Task:
    """Open MiniWoB task ``task_id`` in browser-use's ``session`` (started if needed), start a seeded episode
    with the timer lifted, and return the task (goal and fields from the page's utterance).

    Raises:
        EnvError: The page did not load.
    """
    if not session.is_cdp_connected:
        await session.start()
    await session.navigate_to(f"{base_url.rstrip('/')}/{task_id}.html")
    page = await session.get_current_page()
    if page is None:
        raise EnvError(f"no page open after loading {task_id}")
    await _until(page, _READY)
    goal, params = extract_fields(task_id, await page.evaluate(_START, seed))
    return Task(id=task_id, goal=goal, app="miniwob", params=params, seed=seed)


async def reward(agent: Any) -> bool:
    """The checker for `BrowserUseMemory.run`: whether the MiniWoB episode on the agent's page ended in success."""
    page = await agent.browser_session.get_current_page()
    if page is None:
        return False
    done = await page.evaluate("() => WOB_DONE_GLOBAL === true && WOB_RAW_REWARD_GLOBAL >= 1 - 1e-9")
    return bool(done == "True")
