"""The AT-SPI bridge: a child process, inside one desktop session, that reads and acts on its apps.

Run as a script (``python bridge.py``) with the session's environment; it imports only the standard
library and PyGObject, never guimem. It answers one JSON request per line on stdin with one JSON
reply per line on stdout. It is a process of its own because libatspi binds to one accessibility
bus per process (each env has its own), and because a call into an app that is running a modal
dialog blocks the caller: actions are therefore sent without waiting for the reply, over a fresh
peer-to-peer connection to the app (the field notes' pitfall).

It is also the session's watchdog: when the env's process dies, however it dies, the bridge's stdin
closes and it ends the session's process group.

Requests: ``{"op": "tree"}``, ``{"op": "action", "key", "index"}``, ``{"op": "set_text", "key", "text"}``,
``{"op": "text", "key"}``, ``{"op": "quit"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import warnings
from typing import Any

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, Gio, GLib  # noqa: E402

# libatspi marks the per-interface getters deprecated; their replacements are not in Debian 12's 2.46
warnings.filterwarnings("ignore", category=DeprecationWarning)

HIDDEN = -(2**31)
TEXT_LIMIT = 4000
_ROOT = "/org/a11y/atspi/accessible/root"


def _a11y_address(timeout_s: float = 10.0) -> str:
    """The accessibility bus address, asked of the session bus until its launcher answers."""
    session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            reply = session.call_sync("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress", None,
                                      GLib.VariantType("(s)"), Gio.DBusCallFlags.NO_AUTO_START, 2000, None)
            return str(reply.unpack()[0])
        except GLib.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Bridge:
    """The accessibility tree of every app on the session's display, and actions on its nodes."""

    def __init__(self) -> None:
        self.address = _a11y_address()
        os.environ["AT_SPI_BUS_ADDRESS"] = self.address
        Atspi.init()
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        self.bus = Gio.DBusConnection.new_for_address_sync(self.address, flags, None, None)
        self.nodes: dict[str, Any] = {}
        self.peers: dict[int, Any] = {}

    def _key(self, acc: Any) -> str:
        return f"{acc.get_process_id()}:{acc.path}"

    def tree(self) -> list[dict[str, Any]]:
        """Every showing node of every app, parents before children (an app that quits while it is read is
        left out)."""
        self.nodes = {}
        out: list[dict[str, Any]] = []
        desktop = Atspi.get_desktop(0)
        for i in range(desktop.get_child_count()):
            app = desktop.get_child_at_index(i)
            mark = len(out)
            try:
                for j in range(app.get_child_count() if app is not None else 0):
                    window = app.get_child_at_index(j)
                    if window is not None:
                        self._walk(window, -1, app.get_name() or "", out)
            except GLib.Error:
                del out[mark:]
        return out

    def _walk(self, acc: Any, parent: int, app: str, out: list[dict[str, Any]]) -> None:
        try:
            node = self._node(acc, parent, app)
        except GLib.Error:
            return  # the widget went away while the tree was read
        if node is None:
            return
        index = len(out)
        out.append(node)
        try:
            count = min(acc.get_child_count(), 500)
        except GLib.Error:
            return
        for i in range(count):
            try:
                child = acc.get_child_at_index(i)
            except GLib.Error:
                continue
            if child is not None:
                self._walk(child, index, app, out)

    def _node(self, acc: Any, parent: int, app: str) -> dict[str, Any] | None:
        states = {s.value_nick for s in acc.get_state_set().get_states()}
        if "showing" not in states:
            return None
        key = self._key(acc)
        self.nodes[key] = acc
        interfaces = set(acc.get_interfaces())
        bounds = None
        if "Component" in interfaces:
            ext = Atspi.Component.get_extents(acc, Atspi.CoordType.SCREEN)
            if ext.x != HIDDEN:
                bounds = [ext.x, ext.y, ext.width, ext.height]
        actions = [Atspi.Action.get_action_name(acc, i) for i in range(Atspi.Action.get_n_actions(acc))] \
            if "Action" in interfaces else []
        text = None
        if "Text" in interfaces:
            count = Atspi.Text.get_character_count(acc)
            text = Atspi.Text.get_text(acc, 0, min(count, TEXT_LIMIT))
        value = Atspi.Value.get_current_value(acc) if "Value" in interfaces else None
        return {"key": key, "parent": parent, "app": app, "role": acc.get_role_name(), "name": acc.get_name() or "",
                "description": acc.get_description() or "", "states": sorted(states), "bounds": bounds,
                "actions": actions, "text": text, "value": value, "editable_text": "EditableText" in interfaces}

    def _dbus(self, method: str, args: Any, reply: str) -> Any:
        return self.bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method, args,
                                  GLib.VariantType(reply), Gio.DBusCallFlags.NONE, 3000, None).unpack()[0]

    def _bus_name(self, pid: int) -> str:
        """The accessibility-bus connection of the app process ``pid``."""
        for name in self._dbus("ListNames", None, "(as)"):
            if name.startswith(":") and self._dbus("GetConnectionUnixProcessID", GLib.Variant("(s)", (name,)),
                                                   "(u)") == pid:
                return str(name)
        raise KeyError(f"app process {pid}")

    def _peer(self, acc: Any) -> Any:
        """A peer-to-peer connection to ``acc``'s app (made once per app process)."""
        pid = acc.get_process_id()
        if pid not in self.peers:
            reply = self.bus.call_sync(self._bus_name(pid), _ROOT, "org.a11y.atspi.Application",
                                       "GetApplicationBusAddress", None, GLib.VariantType("(s)"),
                                       Gio.DBusCallFlags.NO_AUTO_START, 3000, None)
            address = str(reply.unpack()[0])
            self.peers[pid] = Gio.DBusConnection.new_for_address_sync(
                address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT, None, None) if address else None
        return self.peers[pid]

    def action(self, key: str, index: int) -> None:
        """Send DoAction(``index``) to the node without waiting for the app to answer."""
        acc = self.nodes[key]
        peer = self._peer(acc)
        target = peer or self.bus
        message = Gio.DBusMessage.new_method_call(None if peer else self._bus_name(acc.get_process_id()), acc.path,
                                                  "org.a11y.atspi.Action", "DoAction")
        message.set_body(GLib.Variant("(i)", (index,)))
        message.set_flags(Gio.DBusMessageFlags.NO_REPLY_EXPECTED)
        target.send_message(message, Gio.DBusSendMessageFlags.NONE)
        target.flush_sync(None)

    def set_text(self, key: str, text: str) -> bool:
        """Replace the node's text (EditableText)."""
        return bool(Atspi.EditableText.set_text_contents(self.nodes[key], text))

    def text(self, key: str) -> str:
        """The node's full text."""
        acc = self.nodes[key]
        return str(Atspi.Text.get_text(acc, 0, Atspi.Text.get_character_count(acc)))

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request's reply."""
        op = request.get("op")
        if op == "tree":
            return {"ok": True, "nodes": self.tree()}
        if op == "action":
            self.action(request["key"], int(request.get("index", 0)))
            return {"ok": True}
        if op == "set_text":
            return {"ok": self.set_text(request["key"], request["text"])}
        if op == "text":
            return {"ok": True, "text": self.text(request["key"])}
        return {"ok": False, "error": f"unknown op {op!r}"}


def main() -> int:
    """Serve requests until ``quit`` comes, or until stdin closes: then the env's process is gone (killed,
    even with SIGKILL), and the bridge ends the whole session, its process group, on its way out."""
    bridge = Bridge()
    print(json.dumps({"ok": True, "ready": bridge.address}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "quit":
            return 0
        try:
            reply = bridge.handle(request)
        except KeyError as exc:
            reply = {"ok": False, "error": f"no node {exc.args[0]} (the screen changed: observe again)"}
        except GLib.Error as exc:
            reply = {"ok": False, "error": f"AT-SPI: {exc.message}"}
        print(json.dumps(reply), flush=True)
    os.killpg(os.getpgrp(), signal.SIGTERM)
    return 0


if __name__ == "__main__":
    sys.exit(main())
