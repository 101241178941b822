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
