"""The former home of BrowserGym's task ids, observations and actions, now `guimem.envs.browsergym`.

Kept so existing imports (``guimem.tasks.suites``, user code) keep working; new code imports from the package.
"""

from guimem.envs.browsergym.actions import KEYS, UnmappableActionError, to_browsergym
from guimem.envs.browsergym.observation import DomInfo, Parsed, dom_info, location_of, parse_observation
from guimem.envs.browsergym.tasks import benchmark_of, goal_and_params, gym_id, normalise_task_id

__all__ = ["KEYS", "DomInfo", "Parsed", "UnmappableActionError", "benchmark_of", "dom_info", "goal_and_params",
           "gym_id", "location_of", "normalise_task_id", "parse_observation", "to_browsergym"]
