"""Build environments and policies by name from the registry and the process settings."""

from __future__ import annotations

import difflib
from pathlib import Path

from guimem.agents.base import Policy
from guimem.agents.llm import STRATEGIES
from guimem.envs.base import Env
from guimem.errors import UnknownBackendError
from guimem.harness.runfiles import BACKENDS, EvalSpec
from guimem.memory.factory import check_method
from guimem.registry import Registry, default_registry
from guimem.settings import GuimemSettings


def check_names(spec: EvalSpec, settings: GuimemSettings, registry: Registry | None = None) -> None:
    """Every part an evaluation names exists, and your own import paths import: checked before a run
    folder, a store or an episode is made, so a typo costs nothing.

    Raises:
        UnknownBackendError: A name that is not registered (with "did you mean"), an unknown ``--backend`` or
            ``--context``.
        ImportPathError: Your own ``module:Class`` (method, env, policy, LLM backend) cannot be imported.
    """
    reg = registry or default_registry()
    if spec.backend not in BACKENDS:
        raise UnknownBackendError("backend", spec.backend, list(BACKENDS), difflib.get_close_matches(spec.backend,
                                                                                                    BACKENDS))
    if spec.context not in STRATEGIES:  # whatever the policy: a name that means nothing is refused, not recorded
        raise UnknownBackendError("context strategy", spec.context, list(STRATEGIES),
                                  difflib.get_close_matches(spec.context, STRATEGIES))
    for method in spec.methods:
        check_method(method, reg)
    reg.check("env", spec.env)
    reg.check("policy", spec.policy)
    if spec.policy == "llm" or spec.memory.extractor == "llm":
        reg.check("llm", settings.llm.backend)


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
