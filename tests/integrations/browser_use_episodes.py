"""Real browser-use agents on a local MiniWoB++ page with guimem memory, started by test_browser_use.py under the
browser-use environment (``.venv-browser-use``); prints one JSON line per episode.

    python browser_use_episodes.py MODEL_URL MEMORY METHOD EPISODES

MODEL_URL is an OpenAI-compatible endpoint on 127.0.0.1 (the test's scripted server); MEMORY a SQLite path or the
URL of a ``guimem serve``. Each episode: a fresh headless Chromium (Debian's), click-test-2 with seed = episode,
success from the page's own reward, then the round boundary.
"""

from __future__ import annotations

import asyncio
import json
import sys

from guimem.integrations.browser_use import BrowserUseMemory, local_profile, stay_local
from guimem.integrations.browser_use.miniwob import reward, serve_miniwob, start_episode
from guimem.settings import EmbedderSettings, GuimemSettings

stay_local()
from browser_use import Agent, BrowserSession, ChatOpenAI  # noqa: E402  (after stay_local, as documented)


async def main(model_url: str, store: str, method: str, episodes: int) -> None:
    llm = ChatOpenAI(model="scripted", base_url=model_url, api_key="none", max_retries=0)
    settings = GuimemSettings(embedder=EmbedderSettings(name="hashing"))
    with serve_miniwob() as pages, BrowserUseMemory.open(method, store, settings) as memory:
        for seed in range(episodes):
            session = BrowserSession(browser_profile=local_profile())
            try:
                task = await start_episode(session, pages, "click-test-2", seed)
                agent = Agent(task=task.goal, llm=llm, browser_session=session, use_vision=False, use_judge=False)
                await memory.run(agent, task, success=reward, max_steps=4)
            finally:
                await session.kill()
            memory.end_round()
            learned = memory.last
            assert learned is not None
            print(json.dumps({"seed": seed, "success": learned.outcome.success, "reason": learned.outcome.reason,
                              "actions": [s.action.describe() for s in learned.steps],
                              "shown": [s.injection.text for s in learned.steps]}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
