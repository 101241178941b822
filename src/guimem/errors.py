"""The one exception tree of guimem.

Every exception guimem raises derives from `GuimemError`::

    GuimemError
    ├── ConfigError                  bad settings or arguments
    │   ├── UnknownBackendError      a backend name that is not registered ("did you mean ...")
    │   └── ImportPathError          your own ``module:Class`` cannot be imported (where it was looked for)
    ├── MissingDependencyError       an optional extra is not installed (names the pip extra)
    ├── DataError                    bad input data (carries file, line and field when known)
    │   ├── TrajectoryFormatError    a malformed trajectory file
    │   ├── SuiteError               a malformed suite file or an unknown task
    │   ├── FileConflictError        a path names a folder, or a file stands where a folder must
    │   └── EpisodeRefusedError      a memory cannot learn one episode of a round (the round rolled back)
    ├── StoreError                   the memory store failed
    │   ├── MigrationError           the store schema cannot be brought up to date
    │   ├── NotFoundError            an item, event or node that does not exist
    │   └── ConflictError            a concurrent writer won; retry
    ├── LifecycleError               an invalid lifecycle transition (STEER)
    ├── EnvError                     the environment (browser, device) failed — infrastructure, not a bad action
    │   └── EnvNotReadyError         a required binary or device is missing
    ├── SkillError                   a skill program is invalid or failed to run
    ├── LLMError                     the model endpoint failed
    │   ├── LLMResponseError         the model replied, but not in the required form
    │   └── ModelRuntimeError        the local model runtime (llama.cpp) cannot run on this machine
    └── RunStoppedError              an evaluation stopped on infrastructure failures (resumable)

Whether an error is an *infrastructure* failure (the machine's parts failed, not the input or the
agent) is decided here alone, by the class attribute `GuimemError.infrastructure`: true for
`EnvError`, `LLMError`, `StoreError` and `RunStoppedError`, and for their subclasses except
`LLMResponseError` (the model's reply, the agent's own doing) and `NotFoundError` (the caller asked for
an id that does not exist). An episode an infrastructure error ends is recorded as such and never
counted as the agent's failure; the CLI exits 1 on one, 2 on any other error.

A failed GUI action is *not* an exception: it is an `ActionError` value the agent sees next step.
"""

from __future__ import annotations

from typing import ClassVar


def _rebuilt(cls: type[GuimemError], args: tuple[object, ...], state: dict[str, object]) -> GuimemError:
    """An error as `GuimemError.__reduce__` sent it (its own ``__init__`` not called again)."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class GuimemError(Exception):
    """Base of every guimem exception.

    Args:
        message: What went wrong.
        suggestion: What the user can do about it, when known.

    Attributes:
        infrastructure: Whether this is an infrastructure failure (browser, device, model endpoint,
            store, or a run stopped by them), not bad input or the agent's own doing; a class attribute,
            so ``except`` clauses and exit codes all read the same answer.
    """

    infrastructure: ClassVar[bool] = False

    def __init__(self, message: str, *, suggestion: str | None = None) -> None:
        self.message = message
        self.suggestion = suggestion
        super().__init__(message if suggestion is None else f"{message} ({suggestion})")

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle as it is, whatever the subclass's ``__init__`` takes: a worker process sends its error to the
        evaluation that way (``NotFoundError("item", id)`` re-made from its message alone failed, and the
        worker pool's result thread died with it, leaving the run waiting for ever)."""
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


class ConfigError(GuimemError):
    """Settings or arguments that cannot work."""


class UnknownBackendError(ConfigError):
    """A backend name that is not in the registry.

    Args:
        kind: The registry kind (e.g. ``embedder``).
        name: The unknown name.
        known: The registered names.
        close: The closest registered names.
    """

    def __init__(self, kind: str, name: str, known: list[str], close: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else f"known: {', '.join(known)}"
        super().__init__(f"unknown {kind} {name!r}", suggestion=hint)


class ImportPathError(ConfigError):
    """Your own backend, named by its import path (``my_pkg.memory:MyMemory``), cannot be imported.

    It is your code, so there is nothing to pip-install: the message says what was missing and where
    it was looked for.

    Args:
        target: The import path as given.
        message: What went wrong.
        suggestion: What to do about it.
    """

    def __init__(self, target: str, message: str, *, suggestion: str | None = None) -> None:
        self.target = target
        super().__init__(message, suggestion=suggestion)


class MissingDependencyError(GuimemError):
    """An optional dependency is not installed.

    Args:
        package: The missing import.
        extra: The pip extra that installs it.
    """

    def __init__(self, package: str, extra: str | None) -> None:
        self.package = package
        self.extra = extra
        fix = f"pip install 'guimem[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"optional dependency {package!r} is not installed", suggestion=fix)


class DataError(GuimemError):
    """Input data that cannot be used.

    Args:
        message: What is wrong.
        path: The file, when the data came from one.
        line: The 1-based line number, when known.
        field: The dotted field path, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        suggestion: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        where = ":".join(str(p) for p in (path, line) if p is not None)
        prefix = f"{where}: " if where else ""
        at = f"field {field!r}: " if field else ""
        super().__init__(f"{prefix}{at}{message}", suggestion=suggestion)


class TrajectoryFormatError(DataError):
    """A trajectory file that does not follow the documented format (docs/formats.md)."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, field: str | None = None,
                 suggestion: str | None = "each line is one episode as described in docs/formats.md") -> None:
        super().__init__(message, path=path, line=line, field=field, suggestion=suggestion)


class SuiteError(DataError):
    """A suite file that cannot be used, or a task that does not exist."""


class FileConflictError(DataError):
    """A path that cannot be used as a file: it is a folder, or a file stands where a folder must be."""


class EpisodeRefusedError(DataError):
    """One episode of a round boundary that the memory cannot learn; the boundary was rolled back.

    Args:
        index: The episode's 0-based position in the round.
        episode_id: Its id.
        reason: Why it cannot be learned.
    """

    def __init__(self, index: int, episode_id: str, reason: str) -> None:
        self.index = index
        self.episode_id = episode_id
        self.reason = reason
        super().__init__(f"episode {index + 1} of the round cannot be learned: {reason}",
                         suggestion="the episode is set aside (quarantined); the others can be learned without it")


class StoreError(GuimemError):
    """The memory store failed."""

    infrastructure: ClassVar[bool] = True


class MigrationError(StoreError):
    """The store's schema cannot be brought to the version this code needs."""


class NotFoundError(StoreError):
    """Something that was asked for by id does not exist.

    Args:
        what: The kind of thing (``item``, ``node``, ...).
        ident: Its id.
    """

    infrastructure: ClassVar[bool] = False

    FIXES: ClassVar[dict[str, str]] = {
        "item": "see the memory's item ids with `guimem memory list` (GET /v1/items)",
        "file": "check the path: there is no such file",
    }

    def __init__(self, what: str, ident: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(f"no {what} named {ident!r}" if what == "file" else f"no {what} with id {ident!r}",
                         suggestion=self.FIXES.get(what.rsplit(" ", 1)[-1]))


class ConflictError(StoreError):
    """A concurrent writer changed the same item first."""


class LifecycleError(GuimemError):
    """A lifecycle transition that the allowed-transition table forbids.

    Args:
        item_id: The item.
        current: Its status now.
        target: The status asked for.
        allowed: The statuses ``current`` may move to.
    """

    def __init__(self, item_id: str, current: str, target: str, allowed: tuple[str, ...] = ()) -> None:
        self.item_id = item_id
        self.current = current
        self.target = target
        self.allowed = allowed
        hint = (f"from {current} an item may go to {' or '.join(allowed)}" if allowed
                else f"{current} is final: no transition leaves it")
        super().__init__(f"item {item_id!r}: transition {current} -> {target} is not allowed", suggestion=hint)


class EnvError(GuimemError):
    """The environment's infrastructure failed (browser crashed, device gone)."""

    infrastructure: ClassVar[bool] = True


class EnvNotReadyError(EnvError):
    """A binary, driver or device the environment needs is missing."""


class SkillError(GuimemError):
    """A skill program is invalid, or failed while running."""


class LLMError(GuimemError):
    """The model endpoint failed (network, HTTP status, timeout).

    Args:
        message: What failed.
        status: The HTTP status the endpoint answered with, when it answered.
        suggestion: The fix, when known.
    """

    infrastructure: ClassVar[bool] = True

    def __init__(self, message: str, *, status: int | None = None, suggestion: str | None = None) -> None:
        self.status = status
        super().__init__(message, suggestion=suggestion)


class LLMResponseError(LLMError):
    """The model answered, but its reply does not have the required form.

    Args:
        message: What is wrong with the reply.
        reply: The raw reply text.
    """

    infrastructure: ClassVar[bool] = False

    def __init__(self, message: str, *, reply: str) -> None:
        self.reply = reply
        super().__init__(message)


class ModelRuntimeError(LLMError):
    """The local model runtime cannot run here: it died of a signal (SIGILL: built for another
    processor), failed, or hung while decoding a few tokens in a child process."""


class RunStoppedError(GuimemError):
    """An evaluation stopped because the infrastructure kept failing; rerun it to resume.

    Args:
        message: Why it stopped.
        failures: How many episodes are still without a judged result.
        first: The first infrastructure failure's message.
        suggestion: The fix, when the failure suggested one.
    """

    infrastructure: ClassVar[bool] = True

    def __init__(self, message: str, *, failures: int, first: str, suggestion: str | None = None) -> None:
        self.failures = failures
        self.first = first
        fix = f"{suggestion}; then rerun the same command to resume" if suggestion else \
            "fix the cause, then rerun the same command to resume"
        super().__init__(f"{message}: {first}", suggestion=fix)
