"""guimem memory for browser-use agents (``pip install browser-use`` beside guimem; imported only when used).

    from guimem.integrations.browser_use import BrowserUseMemory, stay_local
    stay_local()                                          # browser-use's telemetry, cloud sync, downloads: off
    from browser_use import Agent, ChatOpenAI

    with BrowserUseMemory.open("stack", "bu-memory.sqlite") as memory:   # or a `guimem serve` URL
        agent = Agent(task="Find the cheapest flight to Oslo", llm=ChatOpenAI(model=..., base_url=...))
        history = await memory.run(agent, "flights-oslo", success=my_checker)   # learns from the run
        memory.end_round()                                # when you choose: consolidation, admissions

Before each model call memory is recalled for the page the agent is on, read from browser-use's own browser
state (its selector map), and its block is added to the agent's state message; nothing else about the agent
changes. browser-use pins its dependencies exactly and conflicts with guimem's own (pydantic, mcp, rich,
click, anyio), so it is not a guimem extra: install it in its own environment (``make setup`` builds
``.venv-browser-use``; docs/browser_use.md).
"""

from guimem.integrations.browser_use.local import OFFLINE_ENV, local_profile, stay_local
from guimem.integrations.browser_use.memory import BrowserUseMemory, Checker, Episode, Page, steps_of
from guimem.integrations.browser_use.model import RecallingModel, memory_block, with_memory
from guimem.integrations.browser_use.remote import ServiceMemory
from guimem.integrations.browser_use.state import action_of, observation_of
from guimem.integrations.rounds import EpisodeMemory

__all__ = [
    "OFFLINE_ENV",
    "BrowserUseMemory",
    "Checker",
    "Episode",
    "EpisodeMemory",
    "Page",
    "RecallingModel",
    "ServiceMemory",
    "action_of",
    "local_profile",
    "memory_block",
    "observation_of",
    "stay_local",
    "steps_of",
    "with_memory",
]
