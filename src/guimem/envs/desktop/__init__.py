"""Desktop GTK applications on a private Xvfb display, read and driven through AT-SPI.

The package holds the session (`session`: display, session bus, accessibility bus, and the sweep of
what a killed session left), the bridge child process that talks AT-SPI (`bridge`), the mapping of
its nodes onto guimem's elements (`observation`), the task format and the tasks (`tasks`), and the
`Env` (`env`).
"""

from guimem.envs.desktop.env import DesktopEnv, xdotool_key
from guimem.envs.desktop.session import INSTALL_HINT, DesktopSession, sweep_sessions
from guimem.envs.desktop.tasks import APPS, TASKS, DesktopTask, desktop_task

__all__ = [
    "APPS",
    "INSTALL_HINT",
    "TASKS",
    "DesktopEnv",
    "DesktopSession",
    "DesktopTask",
    "desktop_task",
    "sweep_sessions",
    "xdotool_key",
]
