"""Where memory lives: versioned items and an append-only event log, in SQLite (default) or PostgreSQL."""

from guimem.storage.base import Event, Record, Store, create_store, new_id

__all__ = ["Event", "Record", "Store", "create_store", "new_id"]
