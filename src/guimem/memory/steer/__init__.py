"""STEER: verified knowledge (procedures and warnings) admitted through trials against matched controls."""

from guimem.memory.settings import SteerSettings
from guimem.memory.steer.items import ItemStatus, KnowledgeItem
from guimem.memory.steer.memory import SteerMemory

__all__ = ["ItemStatus", "KnowledgeItem", "SteerMemory", "SteerSettings"]
