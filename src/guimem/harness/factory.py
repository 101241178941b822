"""Build environments and policies by name from the registry and the process settings."""

from __future__ import annotations

from pathlib import Path

from guimem.agents.base import Policy
from guimem.envs.base import Env
from guimem.registry import Registry, default_registry
from guimem.settings import GuimemSettings


def make_env(name: str, settings: GuimemSettings, screenshots_dir: Path | None = None,
             registry: Registry | None = None) -> Env:
    """The environment ``name`` (``miniwob``, ``android``, ...)."""
    env: Env = (registry or default_registry()).create("env", name, settings=settings, screenshots_dir=screenshots_dir)
    return env


def make_policy(name: str, settings: GuimemSettings, seed: int = 0, context: str = "react",
                screenshots: bool = False, registry: Registry | None = None) -> Policy:
    """The policy ``name`` (``explorer``, ``llm``)."""
    policy: Policy = (registry or default_registry()).create(
        "policy", name, settings=settings, seed=seed, context=context, screenshots=screenshots)
    return policy
