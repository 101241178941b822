"""`Preflight`: a part (env, policy) that can prove it will work before the first episode runs."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Preflight(Protocol):
    """An optional ability of envs and policies: start what they will start, once, and say how it went.

    `guimem eval` and `guimem doctor` call it before any episode, so a browser that cannot start
    or a model endpoint that does not answer stops the run at once with the fix, instead of
    being discovered episode by episode.
    """

    def preflight(self) -> str:
        """Check the part works; return a one-line description of what was checked.

        Raises:
            GuimemError: The part cannot work (an `EnvError`, `LLMError`, ... with a suggestion).
        """
        ...
