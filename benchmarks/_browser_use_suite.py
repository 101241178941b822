"""Helper of browser_use_smollm2.py, run under .venv-browser-use: a suite's MiniWoB++ tasks through real
browser-use agents with guimem memory, for R rounds; prints one JSON line per episode.

    python _browser_use_suite.py MODEL_URL STORE METHOD ROUNDS SUITE_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

from guimem.integrations.browser_use import BrowserUseMemory, local_profile, stay_local
from guimem.integrations.browser_use.miniwob import reward, serve_miniwob, start_episode

stay_local()
from browser_use import Agent, BrowserSession, ChatOpenAI  # noqa: E402

REPLY_TOKENS = 384


class _BoundedReplies(httpx.AsyncBaseTransport):
    """llama-cpp-python's server reads ``max_tokens`` and ignores OpenAI's newer ``max_completion_tokens``, the only
    one browser-use's ChatOpenAI sends: without this a reply runs on to the end of the context (seen: 15 minutes
    on one reply, every later call timing out behind it)."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path.endswith("/chat/completions"):
            body = json.loads(request.content)
            body.setdefault("max_tokens", body.get("max_completion_tokens") or REPLY_TOKENS)
            headers = [(k, v) for k, v in request.headers.items() if k.lower() != "content-length"]
            request = httpx.Request("POST", request.url, headers=headers, content=json.dumps(body).encode())
        return await self._inner.handle_async_request(request)


def _counts(history) -> dict[str, int]:
    steps = list(history.history)
    replies = [h for h in steps if h.model_output is not None and h.model_output.action]
    results = [r for h in replies for r in h.result]
    return {"steps": len(steps), "valid_replies": len(replies), "actions": len(results),
            "failed_actions": sum(1 for r in results if r.error)}


async def main(model_url: str, store: str, method: str, rounds: int, suite: Path) -> None:
    # llama.cpp's server refuses OpenAI's json_schema response_format: ask for plain text, browser-use parses it
    llm = ChatOpenAI(model="smollm2", base_url=model_url, api_key="none", max_retries=0,
                     max_completion_tokens=REPLY_TOKENS, dont_force_structured_output=True,
                     http_client=httpx.AsyncClient(transport=_BoundedReplies(), timeout=600))
    entries = json.loads(suite.read_text())["tasks"]
    with serve_miniwob() as pages, BrowserUseMemory.open(method, store) as memory:
        for round_index in range(rounds):
            for entry in entries:
                session = BrowserSession(browser_profile=local_profile())
                start = time.monotonic()
                try:
                    task = await start_episode(session, pages, entry["task"], entry["seed"])
                    agent = Agent(task=task.goal, llm=llm, browser_session=session, use_vision=False,
                                  use_judge=False, flash_mode=True, enable_planning=False, max_failures=1,
                                  final_response_after_failure=False,
                                  llm_timeout=300, step_timeout=600)
                    history = await memory.run(agent, task, success=reward, max_steps=entry.get("max_steps") or 5)
                finally:
                    await session.kill()
                learned = memory.last
                shown = sum(1 for s in learned.steps if s.injection.text) if learned else 0
                print(json.dumps({"method": method, "round": round_index, "task": entry["task"], "seed": entry["seed"],
                                  "success": bool(learned and learned.outcome.success), "shown_steps": shown,
                                  "wall_s": round(time.monotonic() - start, 1), **_counts(history)}), flush=True)
            memory.end_round()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5])))
