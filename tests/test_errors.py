"""The exception tree decides in one place which errors are infrastructure failures."""

from __future__ import annotations

import pytest

from guimem import errors
from guimem.cli.output import EXIT_INFRA, EXIT_USAGE, exit_code_for
from guimem.harness.episode import infra_failure

INFRA = {"StoreError", "MigrationError", "ConflictError", "EnvError", "EnvNotReadyError", "LLMError",
         "ModelRuntimeError", "RunStoppedError"}


def _samples() -> list[errors.GuimemError]:
    return [errors.StoreError("db gone"), errors.MigrationError("old"), errors.ConflictError("raced"),
            errors.NotFoundError("item", "zz"), errors.EnvError("crashed"), errors.EnvNotReadyError("no chromium"),
            errors.LLMError("timeout"), errors.LLMResponseError("not json", reply="hi"),
            errors.ModelRuntimeError("SIGILL"), errors.RunStoppedError("stopped", failures=1, first="x"),
            errors.ConfigError("bad"), errors.DataError("bad", path="f.jsonl"), errors.SkillError("bad")]


@pytest.mark.parametrize("exc", _samples(), ids=lambda e: type(e).__name__)
def test_the_cli_and_the_episode_read_the_same_infrastructure_answer(exc):
    assert exc.infrastructure is (type(exc).__name__ in INFRA)
    assert exit_code_for(exc) == (EXIT_INFRA if exc.infrastructure else EXIT_USAGE)
    if not isinstance(exc, errors.RunStoppedError):  # a run's stop is no episode's failure
        assert (infra_failure(exc) is not None) is exc.infrastructure


def test_every_error_survives_a_pickle_as_a_worker_sends_it():
    """A worker process sends its error to the evaluation pickled; `NotFoundError("item", id)` re-made from its
    message alone raised TypeError in the pool's result thread, and the run waited for ever (two desktop runs)."""
    import inspect
    import pickle

    from guimem import errors

    made = [errors.GuimemError("g", suggestion="s"), errors.UnknownBackendError("embedder", "e6", ["e5"], ["e5"]),
            errors.ImportPathError("m:C", "no m"), errors.TrajectoryFormatError("bad line", path="t.jsonl", line=2),
            errors.MissingDependencyError("ray", "ray"), errors.DataError("bad", path="f", line=3, field="x"),
            errors.EpisodeRefusedError(2, "ep-1", "too long"), errors.NotFoundError("item", "it-1"),
            errors.LifecycleError("k-1", "candidate", "verified", ("trial",)), errors.LLMError("down", status=503),
            errors.LLMResponseError("not JSON", reply="{"), errors.RunStoppedError("stop", failures=3, first="x")]
    classes = {c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.GuimemError)}
    made += [c("plain") for c in classes if "__init__" not in vars(c)]
    assert {type(e) for e in made} == classes, "every error class is tried"
    for err in made:
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err) and vars(again) == vars(err)


def test_an_error_the_evaluation_could_not_re_make_is_sent_as_one_it_can():
    import pickle

    from guimem.harness.executors import sendable

    class OddError(Exception):
        def __init__(self, a: str, b: str) -> None:
            super().__init__(f"{a}/{b}")

    sent = sendable(OddError("x", "y"))
    assert isinstance(sent, RuntimeError) and "OddError: x/y" in str(sent)
    assert str(pickle.loads(pickle.dumps(sent))) == str(sent)
    plain = ValueError("v")
    assert sendable(plain) is plain
