"""Memory as a service: one `MemoryService` object; the CLI, HTTP API and MCP server are thin layers over it.

This is the top layer with the CLI: it may use everything below (harness, memory, envs, storage).
"""

from guimem.service.core import MemoryService, ServiceSettings

__all__ = ["MemoryService", "ServiceSettings"]
