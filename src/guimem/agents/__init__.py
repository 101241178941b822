"""Frozen agents (policies): the offline `explorer` and the `llm` policy. Memory only changes what they see."""

from guimem.agents.base import Decision, Policy, PolicyInput

__all__ = ["Decision", "Policy", "PolicyInput"]
