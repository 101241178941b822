"""Runs real browser-use agents on a local MiniWoB++ page with guimem memory; started by test_browser_use.py
under the browser-use environment (``.venv-browser-use``), it prints one JSON line per episode.

    python browser_use_episodes.py STORE METHOD EPISODES [SERVE_URL]

The model is guimem's scripted OpenAI-compatible server on 127.0.0.1, replying in browser-use's action format:
click the button the goal names (its index read from the prompt), then ``done``. Every prompt is kept.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys

from guimem.integrations.browser_use import BrowserUseMemory, local_profile, stay_local
from guimem.integrations.browser_use.miniwob import reward, serve_miniwob, start_episode
from guimem.settings import EmbedderSettings, GuimemSettings
from guimem.testing.llm import ScriptedOpenAIServer

stay_local()
from browser_use import Agent, BrowserSession, ChatOpenAI  # noqa: E402  (after stay_local, as documented)

PROMPTS: list[str] = []


def _reply(messages: list) -> str:
    text = messages[-1].text()
    PROMPTS.append(text)
    if "<step_info>Step1 " not in text and "<step_info>Step1\n" not in text:
        return json.dumps({"evaluation_previous_goal": "clicked", "memory": "", "next_goal": "finish",
                           "action": [{"done": {"text": "done", "success": True}}]})
    wanted = re.search(r"Click button (\w+)", text)
    found = re.search(rf"\[(\d+)\]<button[^>]*>\s*{wanted.group(1) if wanted else 'ONE'}\b", text)
    return json.dumps({"evaluation_previous_goal": "start", "memory": "", "next_goal": "click the button",
                       "action": [{"click": {"index": int(found.group(1)) if found else 1}}]})


async def main(store: str, method: str, episodes: int, url: str | None) -> None:
    settings = GuimemSettings(embedder=EmbedderSettings(name="hashing"))
    with ScriptedOpenAIServer(replies=[], default="") as llm_server, serve_miniwob() as pages, \
            BrowserUseMemory.open(method, url or store, settings) as memory:
        llm_server.script.extend([_reply] * 100)
        for seed in range(episodes):
            first = len(PROMPTS)
            session = BrowserSession(browser_profile=local_profile())
            task = await start_episode(session, pages, "click-test-2", seed)
            agent = Agent(task=task.goal, llm=ChatOpenAI(model="scripted", base_url=llm_server.base_url,
                                                         api_key="none", max_retries=0),
                          browser_session=session, use_vision=False, use_judge=False, enable_planning=False)
            history = await memory.run(agent, task, success=reward, max_steps=4)
            await session.kill()
            memory.end_round()
            print(json.dumps({"seed": seed, "success": bool(history.is_done()), "prompts": PROMPTS[first:],
                              "requests": len(llm_server.requests)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None))
