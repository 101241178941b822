"""The core vocabulary every layer speaks: elements, observations, selectors, actions, episodes.

This is the bottom layer: it imports nothing from guimem but `guimem.errors`.
"""

from guimem.types.actions import Action, ActionError, ActionErrorCode, ActionKind, MemoryOp
from guimem.types.episode import (
    TRAJECTORY_FORMAT_VERSION,
    Behaviour,
    InfraComponent,
    InfraFailure,
    InjectedItem,
    Injection,
    ItemKind,
    ItemStatus,
    ModelCall,
    Origin,
    Outcome,
    Step,
    Task,
    Trajectory,
    new_episode_id,
)
from guimem.types.files import (
    append_trajectory,
    artifacts_dir,
    iter_trajectories,
    parse_trajectory_line,
    read_trajectories,
    write_atomic,
    write_trajectories,
)
from guimem.types.preflight import Preflight
from guimem.types.signature import mask_text, page_view, screen_signature, structure_hash
from guimem.types.text import plural, shorten
from guimem.types.ui import (
    Bounds,
    MatchStatus,
    Observation,
    Resolution,
    Role,
    Selector,
    UIElement,
    fill,
    normalise_text,
    placeholders,
)

__all__ = [
    "TRAJECTORY_FORMAT_VERSION",
    "Action",
    "ActionError",
    "ActionErrorCode",
    "ActionKind",
    "Behaviour",
    "Bounds",
    "InfraComponent",
    "InfraFailure",
    "InjectedItem",
    "Injection",
    "ItemKind",
    "ItemStatus",
    "MatchStatus",
    "MemoryOp",
    "ModelCall",
    "Observation",
    "Origin",
    "Outcome",
    "Preflight",
    "Resolution",
    "Role",
    "Selector",
    "Step",
    "Task",
    "Trajectory",
    "UIElement",
    "append_trajectory",
    "artifacts_dir",
    "fill",
    "iter_trajectories",
    "mask_text",
    "new_episode_id",
    "normalise_text",
    "page_view",
    "parse_trajectory_line",
    "placeholders",
    "plural",
    "read_trajectories",
    "screen_signature",
    "shorten",
    "structure_hash",
    "write_atomic",
    "write_trajectories",
]
