"""``guimem serve``: the memory over HTTP (with the inspector page) or over MCP stdio."""

from __future__ import annotations

import socket
from pathlib import Path

import typer
from rich.markup import escape

from guimem.cli.lookup import FIND, is_new_store, resolve_memory
from guimem.cli.output import fail, state
from guimem.errors import ConfigError, GuimemError
from guimem.memory.settings import MemorySpec
from guimem.service.core import MemoryService, ServiceSettings
from guimem.service.guard import is_loopback_host


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; HOST defaults to 127.0.0.1).

    Raises:
        ConfigError: Not HOST:PORT, or the port is outside 1-65535.
    """
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http must be HOST:PORT with a port from 1 to 65535, not {value!r}",
                          suggestion="e.g. --http 127.0.0.1:8765")
    return host, int(port)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before anything says "serving".

    Raises:
        ConfigError: The address cannot be bound (in use, not this machine's, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                          suggestion="pick another port, or stop the process that uses it") from None
    sock.set_inheritable(True)
    return sock


def _serve_mcp(ctx: typer.Context, service: MemoryService, transport: str, note: str | None) -> None:
    """Serve ``service``'s MCP tools over ``transport`` (stdio), ``note`` said first."""
    if transport != "stdio":
        raise fail(ctx, ConfigError(f"unknown MCP transport {transport!r}", suggestion="use --mcp stdio"))
    import anyio

    from guimem.service.mcp import build_server
    from guimem.service.mcpwire import serve_stdio

    if note:
        state(ctx).err.print(note)
    anyio.run(serve_stdio, build_server(service))


def serve(
    ctx: typer.Context,
    store: str = typer.Option(..., "--store", help="A SQLite path or postgresql://..."),
    method: str | None = FIND,
    http: str | None = typer.Option(None, "--http", help="HOST:PORT for the HTTP API and the inspector page."),
    mcp: str | None = typer.Option(None, "--mcp", help="'stdio' to serve MCP tools over stdin/stdout."),
    data_dir: Path | None = typer.Option(None, "--data-dir",
                                         help="Export/import paths must lie here (default: GUIMEM_DATA_DIR)."),
    run: Path | None = typer.Option(None, "--run", help="An eval run directory whose injections the page shows."),
    max_body_mb: float = typer.Option(5.0, "--max-body-mb", help="Largest accepted request body."),
    insecure: bool = typer.Option(False, "--insecure", help="Serve a non-loopback address without an API key "
                                  "(anyone who can reach it can change memory)."),
) -> None:
    """Serve one memory: HTTP API + inspector (``--http 127.0.0.1:8765``) or MCP (``--mcp stdio``)."""
    st = state(ctx)
    if (http is None) == (mcp is None):
        raise fail(ctx, ConfigError("give exactly one of --http HOST:PORT or --mcp stdio"))
    made = f"[bold yellow]note:[/] there was no store at {escape(store)}: a new, empty one was made there"
    new = is_new_store(store)  # served all the same (memory is learned through it), but said: a mistyped path shows
    try:
        method, namespace = resolve_memory(store, method, adds=True)
        service = MemoryService(ServiceSettings(store=store, method=method, namespace=namespace,
                                                data_dir=data_dir or st.settings.data_dir,
                                                spec=MemorySpec(extractor=st.settings.extractor)), st.settings)
    except GuimemError as exc:
        raise fail(ctx, exc) from None
    try:
        try:  # before it listens: the first recall does not wait for the model
            service.warm()
        except GuimemError as exc:  # the first recall tries again, and reports it where it happens
            st.err.print(f"[bold yellow]warning:[/] memory's models did not load ahead: {exc.message}")
        if mcp is not None:
            _serve_mcp(ctx, service, mcp, made if new else None)
            return
        import uvicorn

        from guimem.service.http import create_app
        from guimem.service.limits import ConnectionLimits, guarded_protocol, quiet_logs

        key = st.settings.api_key.get_secret_value() if st.settings.api_key else None
        try:
            host, port = parse_address(http or "")
            if key is None and not insecure and not is_loopback_host(host):
                raise ConfigError(f"refusing to serve {host} without an API key: anyone who reaches it could "
                                  "change memory", suggestion="set GUIMEM_API_KEY, bind 127.0.0.1, or pass --insecure")
            sock = listen(host, port)
        except ConfigError as exc:
            raise fail(ctx, exc) from None
        if key is None and insecure and not is_loopback_host(host):
            st.err.print("[bold yellow]warning:[/] serving without an API key on a non-loopback address (--insecure)")
        app = create_app(service, api_key=key, max_body_bytes=int(max_body_mb * 1_000_000), run_dir=run,
                         insecure=insecure)
        if new:
            st.err.print(made)
        st.err.print(f"guimem serving {method} from {store} on http://{host}:{port}/ "
                     f"({'API key required' if key else 'no API key'})")
        limits = ConnectionLimits.for_descriptor_limit()
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", http=guarded_protocol(limits),
                                               timeout_keep_alive=5, backlog=limits.backlog))
        quiet_logs()
        server.run(sockets=[sock])
    finally:
        service.close()
