"""Infrastructure failures (env, model endpoint) are loud, never counted, and retried on resume."""

from __future__ import annotations

import pytest

from guimem.errors import EnvError, EnvNotReadyError, LLMError, RunStoppedError
from guimem.harness import jobs
from guimem.harness.episode import run_episode
from guimem.harness.evaluate import Evaluation
from guimem.harness.runfiles import RunDir
from guimem.settings import LLMSettings
from guimem.testing import FormEnv, ScriptedOpenAIServer
from guimem.types import InfraComponent, Task
from tests.harness.test_evaluate import settings, spec, strip_timing


class FlakyFormEnv(FormEnv):
    """A form whose browser 'crashes' on chosen resets (counted across every instance)."""

    resets = 0
    fail_on: frozenset[int] = frozenset()
    fail_from: int | None = None

    def reset(self, task: Task):
        cls = type(self)
        cls.resets += 1
        if cls.resets in cls.fail_on or (cls.fail_from is not None and cls.resets >= cls.fail_from):
            raise EnvError("chromium crashed", suggestion="check `guimem doctor`")
        return super().reset(task)


@pytest.fixture
def flaky(monkeypatch):
    class Env(FlakyFormEnv):
        resets = 0

    monkeypatch.setattr(jobs, "make_env", lambda name, s: Env())
    return Env


def _methods(summary):
    return {k: {f: v for f, v in m.items() if f != "infra"} for k, m in strip_timing(summary.model_dump())["methods"]
            .items()}


def test_an_env_crash_is_retried_and_never_counted_as_an_agent_failure(tmp_path, flaky):
    baseline = Evaluation(spec(methods=["none", "graph"]), tmp_path / "base", settings()).run()
    flaky.resets, flaky.fail_on = 0, frozenset({3, 9})
    summary = Evaluation(spec(methods=["none", "graph"]), tmp_path / "flaky", settings()).run()
    assert _methods(summary) == _methods(baseline)
    infra = summary.methods["none"].infra
    assert infra.attempts == 1 and infra.unresolved == 0 and "chromium crashed" in infra.first_error
    assert summary.methods["graph"].infra.attempts == 1
    lines = RunDir(tmp_path / "flaky").results()
    failed = [r for r in lines if r.infra is not None]
    assert len(failed) == 2 and all(r.infra.component is InfraComponent.ENV and not r.success for r in failed)
    report = (tmp_path / "flaky" / "report.html").read_text()
    assert "Infrastructure failures" in report and "chromium crashed" in report


def test_consecutive_infra_failures_stop_the_run_and_a_resume_equals_an_uninterrupted_run(tmp_path, flaky):
    baseline = Evaluation(spec(methods=["none", "steer"]), tmp_path / "base", settings()).run()
    flaky.resets, flaky.fail_from = 0, 7
    with pytest.raises(RunStoppedError, match="3 infrastructure failures in a row") as stopped:
        Evaluation(spec(methods=["none", "steer"]), tmp_path / "run", settings()).run()
    assert "chromium crashed" in stopped.value.message and "resume" in stopped.value.suggestion
    lines = RunDir(tmp_path / "run").results()
    assert [r.infra is None for r in lines] == [True] * 6 + [False] * 3
    flaky.fail_from = None
    resumed = Evaluation(spec(methods=["none", "steer"]), tmp_path / "run", settings()).run()
    assert _methods(resumed) == _methods(baseline)
    assert resumed.methods["steer"].infra.attempts == 3 and resumed.methods["steer"].infra.unresolved == 0


def test_failures_left_after_the_retries_stop_the_run_before_the_round_boundary(tmp_path, flaky):
    settings_ = settings()
    settings_.run.infra_breaker = 100
    flaky.resets, flaky.fail_on = 0, frozenset({2, 5})  # episode 2 fails, and again on its retry (reset 5)
    with pytest.raises(RunStoppedError, match="still fail after 1 retries"):
        Evaluation(spec(methods=["none", "graph"]), tmp_path, settings_).run()
    assert RunDir(tmp_path).snapshot("none", 0) is None  # no boundary was applied to an incomplete round


def test_a_missing_browser_stops_the_evaluation_before_any_episode(tmp_path, monkeypatch):
    def missing(name, s):
        from guimem.envs.miniwob import MiniWoBEnv

        s = s.model_copy(deep=True)
        s.browser.chrome_binary = "/nonexistent/chromium"
        return MiniWoBEnv(s.browser)

    monkeypatch.setattr(jobs, "make_env", missing)
    with pytest.raises(EnvNotReadyError, match="chromium not found"):
        Evaluation(spec(methods=["none", "graph"]), tmp_path, settings()).run()
    assert RunDir(tmp_path).results() == []


def test_an_unreachable_model_stops_the_evaluation_in_its_preflight(tmp_path, monkeypatch):
    s = settings()
    s.llm = LLMSettings(base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=2)
    llm_spec = spec(methods=["none", "graph"]).model_copy(update={"policy": "llm"})
    with pytest.raises(LLMError, match="no model server answers"):
        Evaluation(llm_spec, tmp_path, s).run()
    assert RunDir(tmp_path).results() == []


def test_a_model_endpoint_that_dies_mid_episode_is_an_infrastructure_failure():
    from guimem.agents.llm import LLMPolicy
    from guimem.llm.openai import OpenAIChatClient

    server = ScriptedOpenAIServer(default='{"action": {"kind": "wait"}}')
    with server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, max_retries=1, timeout_s=2), backoff_s=0.01)
        policy = LLMPolicy(client)
        assert "scripted" in policy.preflight()
    traj = run_episode(FormEnv(), policy, Task(id="form", goal="", app="form", seed=1))
    assert traj.outcome.infra is not None and traj.outcome.infra.component is InfraComponent.MODEL
    assert not traj.outcome.success and traj.steps == ()


def test_the_llm_client_gives_up_within_its_total_time_budget():
    import time

    from guimem.llm import text_message
    from guimem.llm.openai import OpenAIChatClient

    with ScriptedOpenAIServer([(503, "busy")] * 50) as server:
        client = OpenAIChatClient(LLMSettings(base_url=server.base_url, max_retries=50, max_total_s=1.0),
                                  backoff_s=0.2)
        start = time.monotonic()
        with pytest.raises(LLMError, match="HTTP 503"):
            client.chat([text_message("user", "x")])
        assert time.monotonic() - start < 2.0 and len(server.requests) < 6


def test_the_preflight_loads_memorys_embedding_model_unless_no_method_embeds(tmp_path, monkeypatch):
    """The first step's recall does not wait for the model (e5: about 0.1 s) or the token encoding (0.12 s) to load;
    the baseline alone loads neither."""
    from guimem.embeddings import create_embedder
    from guimem.tokens import TiktokenCounter

    embedded: list[str] = []
    encodings: list[str] = []
    load = TiktokenCounter.load
    monkeypatch.setattr(TiktokenCounter, "load", lambda self: encodings.append(self.encoding) or load(self))

    def counted(embedder_settings):
        made = create_embedder(embedder_settings)
        inner = made.embed
        made.embed = lambda texts, *args, **kw: (embedded.extend(texts), inner(texts, *args, **kw))[1]
        return made

    monkeypatch.setattr(jobs, "create_embedder", counted)
    for methods, loads in ((["none", "graph"], True), (["none"], False)):
        embedded.clear()
        encodings.clear()
        bench = jobs.Workbench(spec(methods=methods), RunDir(tmp_path / methods[-1]), settings())
        try:
            said = bench.preflight()
            assert any("embedder" in line for line in said) is loads, said
            assert bool(embedded) is loads, embedded
            assert encodings == ([bench.settings.token_encoding] if loads else []), encodings
        finally:
            bench.close()
