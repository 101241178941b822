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
