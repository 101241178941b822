"""browser-use kept on this machine: its telemetry, cloud sync, version check and extension downloads off, and a
browser profile for Debian's Chromium that reaches nothing beyond 127.0.0.1."""

from __future__ import annotations

import os
from typing import Any

from guimem.envs.browser import INSTALL_HINT, resolve_binary
from guimem.errors import EnvNotReadyError
from guimem.settings import GuimemSettings

OFFLINE_ENV = {
    "ANONYMIZED_TELEMETRY": "false",      # posthog telemetry
    "BROWSER_USE_CLOUD_SYNC": "false",    # uploading runs to browser-use's cloud
    "BROWSER_USE_VERSION_CHECK": "false",  # asking PyPI for a newer version at every run
    "BROWSER_USE_CLOUD_HINTS": "false",
    "BROWSER_USE_DISABLE_EXTENSIONS": "1",  # downloading uBlock & co. from the Chrome Web Store
}
"""browser-use's own switches for everything it would send or fetch (read from the environment when used)."""

NOWHERE = "http://127.0.0.1:9"
"""A proxy that answers nothing (the discard port): any request that is not to loopback fails at once."""


def stay_local() -> None:
    """Switch off everything browser-use itself sends or fetches (`OFFLINE_ENV`), in this process and the
    processes it starts. Call before creating an ``Agent`` (best: before importing browser-use)."""
    os.environ.update(OFFLINE_ENV)


def local_profile(chrome_binary: str | None = None, **overrides: Any) -> Any:
    """A browser-use ``BrowserProfile`` for Debian's headless Chromium that reaches only 127.0.0.1 (every other
    request goes to a proxy that answers nothing), with no extensions and a fresh temporary profile.

    Args:
        chrome_binary: The browser (default: guimem's ``browser.chrome_binary``, ``/usr/bin/chromium``).
        **overrides: Any other ``BrowserProfile`` field.

    Raises:
        EnvNotReadyError: Chromium is not installed.
    """
    from browser_use import BrowserProfile
    from browser_use.browser.profile import ProxySettings

    stay_local()
    binary = chrome_binary or GuimemSettings().browser.chrome_binary
    path = resolve_binary(binary)
    if path is None:
        raise EnvNotReadyError(f"chromium not found at {binary!r}", suggestion=INSTALL_HINT)
    fields: dict[str, Any] = {"executable_path": path, "headless": True, "enable_default_extensions": False,
                              "user_data_dir": None,
                              "proxy": ProxySettings(server=NOWHERE, bypass="127.0.0.1,localhost")}
    return BrowserProfile(**{**fields, **overrides})
