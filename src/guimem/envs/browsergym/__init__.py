"""BrowserGym as one codec package: task ids (`tasks`), observations (`observation`), actions and their
inverse (`actions`), and the `Env` that drives BrowserGym's own gymnasium env (`env`)."""

from guimem.envs.browsergym.actions import KEYS, UnmappableActionError, parse_action, to_browsergym
from guimem.envs.browsergym.env import BrowserGymEnv, playwright_chromium_revision, use_system_chromium
from guimem.envs.browsergym.observation import Parsed, location_of, parse_observation
from guimem.envs.browsergym.tasks import (
    benchmark_of,
    check_benchmark,
    goal_and_params,
    gym_id,
    miniwob_url,
    normalise_task_id,
)

__all__ = [
    "KEYS",
    "BrowserGymEnv",
    "Parsed",
    "UnmappableActionError",
    "benchmark_of",
    "check_benchmark",
    "goal_and_params",
    "gym_id",
    "location_of",
    "miniwob_url",
    "normalise_task_id",
    "parse_action",
    "parse_observation",
    "playwright_chromium_revision",
    "to_browsergym",
    "use_system_chromium",
]
