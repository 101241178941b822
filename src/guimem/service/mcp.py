"""The MCP server (``guimem serve --mcp stdio``): the service operations as MCP tools.

Tools take and return JSON-compatible values; trajectories are passed as a list of trajectory
objects (the JSONL format's lines), observations as observation objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from guimem.errors import GuimemError
from guimem.service.core import MemoryService
from guimem.service.models import RecallRequest
from guimem.types import Observation, Trajectory

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

TOOL_OPERATIONS = {
    "recall": "recall", "learn": "learn", "end_round": "end_round", "stats": "stats", "list_items": "list",
    "show_item": "show", "item_history": "history", "export_memory": "export", "import_memory": "import",
    "admit_item": "admit", "retire_item": "retire",
}


def _safe(call: Any) -> dict[str, Any]:
    """Run a service call; a guimem error or an argument that does not validate becomes a typed error
    object the client can read, with the message (never the input) passed on."""
    try:
        return {"ok": True, "result": call()}
    except GuimemError as exc:
        return {"ok": False, "error": type(exc).__name__, "message": exc.message, "suggestion": exc.suggestion}
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return {"ok": False, "error": "ValidationError", "message": f"{where}: {first['msg']}"[:300] if where
                else str(first["msg"])[:300], "suggestion": "see the tool's input schema"}


def build_server(service: MemoryService) -> Any:
    """An `MCPServer` whose tools call ``service``."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        from guimem.errors import MissingDependencyError

        raise MissingDependencyError("mcp", "mcp") from exc
    from guimem import __version__

    server = MCPServer(name="guimem", version=__version__,
                       instructions="Long-term memory for GUI agents: call recall before each step, learn after "
                                    "each episode, end_round at round boundaries.")
    _agent_tools(server, service)
    _inspection_tools(server, service)
    _forbid_unknown_arguments(server)
    return server


def _forbid_unknown_arguments(server: MCPServer[Any]) -> None:
    """Refuse a tool call with an argument the tool does not take (``end_rond``), as the HTTP API refuses an unknown
    field, instead of dropping it unseen; the published input schemas say so (``additionalProperties: false``)."""
    for tool in server._tool_manager.list_tools():  # the SDK reads these live at each call (FuncMetadata)
        base = tool.fn_metadata.arg_model
        tool.fn_metadata.arg_model = type(base.__name__, (base,), {
            "__module__": base.__module__, "model_config": ConfigDict(**base.model_config, extra="forbid")})
        tool.parameters = {**tool.parameters, "additionalProperties": False}


def _agent_tools(server: MCPServer[Any], service: MemoryService) -> None:

    @server.tool()
    def recall(goal: StrictStr, observation: dict[str, Any], task_id: StrictStr = "adhoc",
               params: dict[str, StrictStr] | None = None, step: StrictInt = 0) -> dict[str, Any]:
        """What memory shows the agent before a step: the injection (items, text, token count)."""
        return _safe(lambda: service.recall(RecallRequest(
            goal=goal, observation=Observation.model_validate(observation), task_id=task_id, params=params or {},
            step=step)).model_dump(mode="json"))

    @server.tool()
    def learn(trajectories: list[dict[str, Any]], end_round: StrictBool = False) -> dict[str, Any]:
        """Learn from finished episodes (all or nothing); optionally apply the round boundary."""
        def run() -> dict[str, Any]:
            parsed = [Trajectory.model_validate(t) for t in trajectories]
            return service.learn(parsed, end_round=end_round).model_dump(mode="json")

        return _safe(run)

    @server.tool()
    def end_round() -> dict[str, Any]:
        """Apply a round boundary: merges, admissions, rejections."""
        return _safe(lambda: service.end_round().model_dump(mode="json"))



def _inspection_tools(server: MCPServer[Any], service: MemoryService) -> None:
    @server.tool()
    def stats() -> dict[str, Any]:
        """Item counts by kind and status."""
        return _safe(lambda: service.stats().model_dump(mode="json"))

    @server.tool()
    def list_items(kind: StrictStr | None = None, status: StrictStr | None = None) -> dict[str, Any]:
        """Current items, optionally filtered by kind and status."""
        return _safe(lambda: [i.model_dump(mode="json") for i in service.list_items(kind, status)])

    @server.tool()
    def show_item(item_id: StrictStr) -> dict[str, Any]:
        """One item in full (a skill with its code)."""
        return _safe(lambda: service.show(item_id).model_dump(mode="json"))

    @server.tool()
    def item_history(item_id: StrictStr) -> dict[str, Any]:
        """An item's events with their evidence."""
        return _safe(lambda: [e.model_dump(mode="json") for e in service.history(item_id)])

    @server.tool()
    def export_memory(path: StrictStr) -> dict[str, Any]:
        """Export the memory to a JSONL file inside the data directory."""
        return _safe(lambda: service.export(Path(path)).model_dump(mode="json"))

    @server.tool()
    def import_memory(path: StrictStr) -> dict[str, Any]:
        """Import an export from a JSONL file inside the data directory."""
        return _safe(lambda: service.import_(Path(path)).model_dump(mode="json"))

    @server.tool()
    def admit_item(item_id: StrictStr, reason: StrictStr = "manual") -> dict[str, Any]:
        """Admit an item in trial (manual curation, logged)."""
        return _safe(lambda: service.set_status(item_id, "admitted", reason).model_dump(mode="json"))

    @server.tool()
    def retire_item(item_id: StrictStr, reason: StrictStr = "manual") -> dict[str, Any]:
        """Retire an admitted item (manual curation, logged)."""
        return _safe(lambda: service.set_status(item_id, "retired", reason).model_dump(mode="json"))
