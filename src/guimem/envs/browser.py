"""Headless Chromium for environments: Debian's binary and chromedriver, nothing that phones home."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from guimem.errors import EnvError, EnvNotReadyError, MissingDependencyError
from guimem.processes import owned_tempdir, sweep_orphans
from guimem.settings import BrowserSettings

log = logging.getLogger(__name__)

PROFILE_PREFIX = "guimem-chrome-"
INSTALL_HINT = "sudo apt-get install -y chromium chromium-driver (or run `make setup`)"

CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    "--mute-audio",
    "--password-store=basic",
)


def resolve_binary(binary: str) -> str | None:
    """The absolute path of an executable (a path or a name on PATH), or None when it is missing."""
    if os.path.isabs(binary):
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def binary_version(binary: str) -> str | None:
    """``<binary> --version`` output, or None when it is missing or fails."""
    path = resolve_binary(binary)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@dataclass
class Browser:
    """A running headless Chromium driven by Selenium; `close` quits it and removes its profile."""

    driver: Any
    profile_dir: str
    closed: bool = field(default=False)

    def close(self) -> None:
        """Quit the browser (idempotent)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.driver.quit()
        except Exception:  # the browser may already be gone; nothing else to do
            log.warning("chromium did not quit cleanly", exc_info=True)
        finally:
            shutil.rmtree(self.profile_dir, ignore_errors=True)


def launch_chrome(settings: BrowserSettings, window: tuple[int, int] = (500, 400)) -> Browser:
    """Start headless Chromium with a fresh profile and background networking off.

    Raises:
        EnvNotReadyError: Chromium or chromedriver is not installed.
        EnvError: They are installed but the browser did not start.
    """
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError as exc:
        raise MissingDependencyError("selenium", "miniwob") from exc
    chrome = resolve_binary(settings.chrome_binary)
    driver_path = resolve_binary(settings.chromedriver)
    if chrome is None or driver_path is None:
        missing = "chromium" if chrome is None else "chromedriver"
        raise EnvNotReadyError(f"{missing} not found ({settings.chrome_binary}, {settings.chromedriver})",
                               suggestion=INSTALL_HINT)
    sweep_orphans(PROFILE_PREFIX)  # profiles of processes that were killed before they could remove theirs
    profile = owned_tempdir(PROFILE_PREFIX)
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for flag in CHROME_FLAGS if settings.headless else CHROME_FLAGS[1:]:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    try:
        driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    except WebDriverException as exc:
        shutil.rmtree(profile, ignore_errors=True)
        raise EnvError(f"chromium did not start: {exc.msg}", suggestion=INSTALL_HINT) from exc
    return Browser(driver=driver, profile_dir=profile)


DEVTOOLS_MAX_BYTES = 32 * 1024 * 1024
"""The largest reply `DevToolsPage` parses, in characters (a page's answer is page text; the socket has read it
by then, as WebDriver's would have)."""


class DevToolsPage:
    """A direct DevTools connection to one page of a browser `launch_chrome` started, for the scripts an env runs
    every step (its snapshots): the browser's own protocol on loopback, beside Selenium's. A script's round trip
    is about 1 ms here against 5–10 ms through WebDriver, whose driver does more per command
    (`benchmarks/miniwob_latency.py`). Scripts run in the page's main world, as Selenium's ``execute_script``.

    Args:
        address: The browser's DevTools address (``host:port`` on loopback; Selenium's ``debuggerAddress``).
        target: The page's target id (Selenium's window handle).
        timeout_s: The most a connection or a script may take.

    Raises:
        EnvError: The browser is not reachable there, or has no such page.
    """

    def __init__(self, address: str, target: str, timeout_s: float = 30.0) -> None:
        import http.client
        import json
        import urllib.request

        try:
            import websocket
        except ImportError as exc:
            raise MissingDependencyError("websocket-client", "miniwob") from exc
        host, _, port = address.rpartition(":")
        if host not in ("localhost", "127.0.0.1") or not port.isdigit():
            raise EnvError(f"the browser's DevTools address is not on loopback: {address!r}")
        base = f"127.0.0.1:{int(port)}"
        self.timeout_s = timeout_s
        self._next = 0
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        try:
            with direct.open(f"http://{base}/json/list", timeout=timeout_s) as reply:
                pages = json.loads(reply.read(DEVTOOLS_MAX_BYTES))
            url = next(p["webSocketDebuggerUrl"] for p in pages if isinstance(p, dict) and p.get("id") == target)
            if not isinstance(url, str) or not url.startswith(f"ws://{base}/"):
                raise EnvError(f"the page's DevTools socket is not on loopback: {url!r}")
            self._ws = websocket.create_connection(url, timeout=timeout_s, suppress_origin=True,
                                                  http_no_proxy=["127.0.0.1"],
                                                  skip_utf8_validation=True)  # json.loads decodes it
        except StopIteration:
            raise EnvError(f"the browser has no page {target!r} (it was closed?)") from None
        except (OSError, ValueError, KeyError, TypeError, http.client.HTTPException,
                websocket.WebSocketException) as exc:
            raise EnvError(f"the browser's DevTools do not answer at {base}: {exc}") from exc

    def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        """The JSON value of ``expression`` in the page (of the promise it returns when ``await_promise``).

        Raises:
            EnvError: The script threw, or the browser did not answer in time (or closed the connection).
        """
        import json

        import websocket

        self._next += 1
        ask = {"id": self._next, "method": "Runtime.evaluate",
               "params": {"expression": expression, "returnByValue": True, "awaitPromise": await_promise,
                          "timeout": int(self.timeout_s * 1000)}}
        try:
            self._ws.send(json.dumps(ask))
            while True:
                text = self._ws.recv()
                if len(text) > DEVTOOLS_MAX_BYTES:
                    raise EnvError(f"the page's answer is over {DEVTOOLS_MAX_BYTES} bytes")
                reply = json.loads(text)
                if isinstance(reply, dict) and reply.get("id") == self._next:
                    break
        except (OSError, ValueError, websocket.WebSocketException) as exc:
            raise EnvError(f"the browser's DevTools connection failed: {exc}") from exc
        try:
            if "error" in reply:
                raise EnvError(f"browser script failed: {str(reply['error'].get('message', reply['error']))[:500]}")
            result = reply.get("result", {})
            if "exceptionDetails" in result:
                details = result["exceptionDetails"]
                message = details.get("exception", {}).get("description") or details.get("text", "an exception")
                raise EnvError(f"browser script failed: {str(message)[:500]}")
            return result.get("result", {}).get("value")
        except (AttributeError, TypeError) as exc:  # a reply of another shape
            raise EnvError(f"the browser's DevTools answered something unexpected: {exc}") from exc

    def close(self) -> None:
        """Close the connection (the browser and its page stay; idempotent)."""
        try:
            self._ws.close()
        except Exception:  # already gone: nothing to release
            log.debug("the DevTools connection did not close cleanly", exc_info=True)
