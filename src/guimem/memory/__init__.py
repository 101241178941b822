"""Memory methods: each wraps a frozen agent by choosing what it sees (recall), and learns from episodes.

Every method implements `Memory`: ``recall`` per step, ``learn`` per episode, ``end_round`` at a
round boundary. Methods: ``none``, ``graph``, ``skills``, ``steer``, ``append_all_similarity``,
``append_all_operational`` and ``stack``.
"""

from guimem.memory.base import LearnReport, Memory, NoMemory, RecallQuery

__all__ = ["LearnReport", "Memory", "NoMemory", "RecallQuery"]
