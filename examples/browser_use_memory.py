"""A browser-use agent with guimem memory on a local MiniWoB++ page: memory before each step, learning after it."""
import asyncio
import os

from guimem.integrations.browser_use import BrowserUseMemory, local_profile, stay_local
from guimem.integrations.browser_use.miniwob import reward, serve_miniwob, start_episode

stay_local()  # browser-use's telemetry, cloud sync, version check and extension downloads: off
from browser_use import Agent, BrowserSession, ChatOpenAI  # noqa: E402

# any OpenAI-compatible model on this machine (llama.cpp's server, vLLM, Ollama)
llm = ChatOpenAI(model="local", base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"), api_key="-")


async def main() -> None:
    with serve_miniwob() as pages, BrowserUseMemory.open("graph", "bu-memory.sqlite") as memory:
        for seed in range(3):
            session = BrowserSession(browser_profile=local_profile())  # Debian's headless chromium, loopback only
            task = await start_episode(session, pages, "click-test-2", seed)
            agent = Agent(task=task.goal, llm=llm, browser_session=session, use_vision=False, use_judge=False)
            await memory.run(agent, task, success=reward, max_steps=5)  # the page's own reward decides success
            await session.kill()
            memory.end_round()  # what this run taught is shown from the next one on
            shown = any(step.injection.text for step in memory.last.steps)
            print(f"seed {seed}: success {memory.last.outcome.success}, memory shown: {shown}")


asyncio.run(main())
