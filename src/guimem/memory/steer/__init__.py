"""STEER: verified knowledge (procedures and warnings) admitted through trials against matched controls."""

from guimem.memory.baselines import AppendAllMemory
from guimem.memory.steer.items import ItemStatus, KnowledgeItem
from guimem.memory.steer.memory import SteerMemory, SteerSettings

__all__ = ["AppendAllMemory", "ItemStatus", "KnowledgeItem", "SteerMemory", "SteerSettings"]
