from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guimem.errors import LifecycleError
from guimem.memory.base import RecallQuery
from guimem.memory.baselines import AppendAllMemory
from guimem.memory.settings import GateSettings, SteerSettings
from guimem.memory.steer.contract import OfflineContractParser, conflicts
from guimem.memory.steer.items import ALLOWED, Evidence, ItemStatus, TrialRecord, check_transition
from guimem.memory.steer.lifecycle import content_id
from guimem.memory.steer.memory import SteerMemory
from guimem.memory.steer.trials import assign, gate
from guimem.testing import FormEnv
from guimem.types import Task
from tests.memory.conftest import LOGIN, PASS, USER, episode


def rec(arm, score, task="t", rnd=0, effective=False):
    return TrialRecord(episode="e", task=task, seed=0, round=rnd, arm=arm, score=score, effective=effective)


GOOD = [rec("trial", 1, rnd=0, effective=True), rec("trial", 1, rnd=1, effective=True),
        rec("control", 0, rnd=0), rec("control", 0, rnd=1)]


def test_gate_admits_with_enough_positive_effective_harmless_evidence():
    assert gate(Evidence(records=GOOD), ItemStatus.TRIAL, GateSettings()).status is ItemStatus.ADMITTED


@pytest.mark.parametrize("records, reason", [
    (GOOD[:1] + GOOD[2:], "1 trial(s) < 2"),
    (GOOD[:3], "1 control(s) < 2"),
    ([rec("trial", 0, rnd=0, effective=True), rec("trial", 0, rnd=1, effective=True), rec("control", 0, rnd=0),
      rec("control", 0, rnd=1)], "is not > 0"),
    ([rec("trial", 1, rnd=0, effective=True), rec("trial", 1, rnd=1), rec("control", 0, rnd=0),
      rec("control", 0, rnd=1)], "1 effective use(s) < 2"),
])
def test_gate_holds_items_back_for_each_missing_condition(records, reason):
    decision = gate(Evidence(records=records), ItemStatus.TRIAL, GateSettings())
    assert decision.status is ItemStatus.TRIAL
    assert any(reason in r for r in decision.reasons)


def test_gate_rejects_on_harm_against_the_matched_control():
    records = [*GOOD, rec("trial", 0, rnd=2, effective=True), rec("control", 1, rnd=2)]
    assert Evidence(records=records).harms == 1
    assert gate(Evidence(records=records), ItemStatus.TRIAL, GateSettings()).status is ItemStatus.REJECTED


def test_gate_thresholds_are_configurable():
    relaxed = GateSettings(min_trials=1, min_controls=1, min_effective_uses=1)
    assert gate(Evidence(records=[GOOD[0], GOOD[2]]), ItemStatus.CANDIDATE, relaxed).status is ItemStatus.ADMITTED


def test_invalid_transitions_raise_a_typed_error():
    with pytest.raises(LifecycleError, match="candidate -> admitted"):
        check_transition("k1", ItemStatus.CANDIDATE, ItemStatus.ADMITTED)
    with pytest.raises(LifecycleError):
        check_transition("k1", ItemStatus.REJECTED, ItemStatus.TRIAL)


@given(st.lists(st.sampled_from(list(ItemStatus)), max_size=12))
def test_no_sequence_of_events_leaves_rejected(targets):
    status = ItemStatus.CANDIDATE
    seen_rejected = False
    for target in targets:
        try:
            check_transition("k", status, target)
        except LifecycleError:
            continue
        assert not seen_rejected, "left rejected"
        status = target
        seen_rejected = status is ItemStatus.REJECTED
    assert ALLOWED[ItemStatus.REJECTED] == frozenset()


@given(st.integers(0, 10), st.integers(0, 10))
def test_a_candidate_is_shown_only_inside_a_trial(round_index, slot):
    from tests.memory.test_steer import _steer_with_candidate

    mem, item_id, q = _steer_with_candidate()
    mem.lifecycle.round = round_index
    inj = mem.recall(RecallQuery(task=q.task, observation=q.observation, slot=slot))
    shown = item_id in inj.ids
    assert shown == (assign(content_id(mem.items()[item_id][0].key), round_index, slot) == "trial")
    assert shown != (item_id in inj.withheld)


_CACHE: dict[str, object] = {}


def _steer_with_candidate():
    if "mem" not in _CACHE:
        import tempfile

        from guimem.embeddings import CachedEmbedder
        from guimem.embeddings.hashing import HashingEmbedder
        from guimem.memory.kit import MemoryKit
        from guimem.storage.sqlite import SQLiteStore
        from guimem.tokens import WhitespaceCounter

        folder = tempfile.mkdtemp()
        k = MemoryKit(SQLiteStore(f"{folder}/m.sqlite"), CachedEmbedder(HashingEmbedder(64)), WhitespaceCounter(), "t")
        mem = SteerMemory(k)
        mem.learn(episode([USER, PASS, LOGIN], seed=1))
        mem.end_round()
        (item_id,) = [i for i, (it, _) in mem.items().items() if it.kind == "procedure"]
        _CACHE.update(mem=mem, item=item_id, q=form_query(3))
    return _CACHE["mem"], _CACHE["item"], _CACHE["q"]


def form_query(seed, slot=0):
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=seed))
    return RecallQuery(task=env.task, observation=obs, slot=slot)


def test_assignment_is_balanced_within_a_task_and_reproducible():
    for item in ("k-a", "k-b", "k-c"):
        for rnd in range(4):
            arms = [assign(item, rnd, slot) for slot in range(2)]
            assert sorted(arms) == ["control", "trial"]
        assert [assign(item, r, 0) for r in range(6)] == [assign(item, r, 0) for r in range(6)]


def test_round_semantics_admitted_at_the_end_of_round_r_is_injected_in_round_r_plus_1(kit):
    mem = SteerMemory(kit)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    assert mem.items() == {}, "proposals wait for the round boundary"
    mem.end_round()
    ((item_id, (_, status)),) = [(i, v) for i, v in mem.items().items() if v[0].kind == "procedure"]
    assert status is ItemStatus.CANDIDATE
    for rnd in (1, 2):
        for slot, seed in ((0, 2), (1, 3)):
            arm = assign(content_id(mem.items()[item_id][0].key), rnd, slot)
            traj = episode([USER, PASS, LOGIN] if arm == "trial" else [LOGIN], seed=seed, memory=mem,
                           round_index=rnd, slot=slot)
            mem.learn(traj)
        assert mem.items()[item_id][1] in (ItemStatus.CANDIDATE, ItemStatus.TRIAL)
        mem.end_round()
    assert mem.items()[item_id][1] is ItemStatus.ADMITTED
    for slot in (0, 1):
        assert item_id in mem.recall(form_query(7, slot)).ids
    history = [e.type for e in kit.store.events(item_id=item_id)]
    assert history[0] == "created" and "admitted" in history
    assert {"trial", "control"} <= set(history[:history.index("admitted")])


def test_warnings_apply_only_on_the_screen_where_the_action_failed(kit):
    mem = SteerMemory(kit, SteerSettings(gate=GateSettings(min_trials=0, min_controls=0, min_effective_uses=0,
                                                           min_difference=-1)))
    mem.learn(episode([LOGIN], seed=1))
    mem.end_round()
    (warning_id,) = [i for i, (it, _) in mem.items().items() if it.kind == "warning"]
    q = form_query(5, slot=0 if assign(warning_id, 1, 0) == "trial" else 1)
    assert warning_id in mem.recall(q).ids
    env = FormEnv()
    env.reset(Task(id="form", goal="", app="form", seed=5))
    box = next(e for e in env.observe().elements if e.editable)
    from guimem.types import Action, ActionKind

    filled = env.step(Action(kind=ActionKind.TYPE, ref=box.ref, text="x")).observation
    assert warning_id not in mem.recall(RecallQuery(task=env.task, observation=filled, slot=q.slot)).ids


@pytest.mark.parametrize("item_goal, task_goal", [
    ("Find the email by Ann and forward that email to Bob.", "Find the email by Ann and reply to that email."),
    ("Find the email by Ann and delete it.", "Find the email by Ann and star it."),
    ("Send the message to Bob.", "Read the message from Bob."),
])
def test_contract_conflicts_on_opposed_actions(item_goal, task_goal):
    parser = OfflineContractParser()
    a = parser.parse(Task(id="a", goal=item_goal, app="mail"))
    b = parser.parse(Task(id="b", goal=task_goal, app="mail"))
    assert conflicts(a, b)
    assert not conflicts(a, parser.parse(Task(id="c", goal=item_goal.replace("Ann", "Cy"), app="mail")))


def test_contract_parses_action_object_roles_and_completion():
    c = OfflineContractParser().parse(Task(id="x", goal='Enter "bob" into the text field and press Submit.',
                                           app="miniwob", params={"target": "bob"}))
    assert (c.action, c.object, c.completion, c.constraints) == ("enter", "text", "press:submit", ("target",))


def test_no_compatible_knowledge_means_an_empty_recorded_abstention(kit):
    mem = SteerMemory(kit)
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    other = RecallQuery(task=Task(id="mail", goal="Delete the email by Ann.", app="mail"),
                        observation=form_query(2).observation)
    inj = mem.recall(other)
    assert inj.items == () and inj.text == "" and inj.tokens == 0
    assert inj.abstained and inj.note == "no compatible knowledge"


def test_leave_one_task_out_hides_items_from_their_source_task(kit):
    mem = SteerMemory(kit, SteerSettings(exclude_source_task=True))
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    assert all(not mem.recall(form_query(3, slot)).items for slot in (0, 1))


def test_append_all_keeps_every_proposal_and_operational_filters_by_contract(kit):
    sim = AppendAllMemory(kit, "similarity", k=5)
    for seed in (1, 2):
        sim.learn(episode([USER, PASS, LOGIN], seed=seed))
    sim.learn(episode([LOGIN], seed=3))
    sim.end_round()
    assert sim.stats() == {"active": 3}
    assert len(sim.recall(form_query(4)).items) == 3
    kit.namespace = "op"
    op = AppendAllMemory(kit, "operational", k=5)
    op.learn(episode([USER, PASS, LOGIN], seed=1))
    op.end_round()
    mail = RecallQuery(task=Task(id="mail", goal="Delete the email by Ann.", app="mail"),
                       observation=form_query(2).observation)
    assert op.recall(mail).items == () and len(op.recall(form_query(4)).items) == 1


def test_a_warning_is_heeded_when_its_action_is_avoided_on_its_screen_only(kit):
    from guimem.memory.steer.propose import OfflineProposer
    from guimem.memory.steer.trials import effective_use

    (warning,) = OfflineProposer(OfflineContractParser()).propose(episode([LOGIN], seed=1), 0)
    assert effective_use(warning, episode([USER, PASS, LOGIN], seed=2)), "Login tapped only after filling the form"
    assert not effective_use(warning, episode([LOGIN], seed=3))


def test_llm_extractors_use_schema_validated_replies(kit):
    from guimem.memory.steer.contract import LLMContractParser
    from guimem.memory.steer.propose import LLMProposer
    from guimem.testing import ScriptedLLM

    llm = ScriptedLLM([
        '{"action": "login", "object": "form", "completion": "press:login"}',
        '{"content": "Fill both fields before pressing Login.", "culprit_index": 0}',
        '{"action": "login", "object": "form", "completion": "press:login"}',
        "no json at all", '{"content": "Type the username, then the password, then log in."}',
        '{"action": "login", "object": "form"}',
    ])
    parser = LLMContractParser(llm)
    assert parser.parse(Task(id="t", goal="Log in", app="form")).completion == "press:login"
    proposer = LLMProposer(llm, parser)
    (warning,) = proposer.propose(episode([LOGIN], seed=1), 0)
    assert warning.kind == "warning" and warning.content == "Fill both fields before pressing Login."
    (procedure,) = proposer.propose(episode([USER, PASS, LOGIN], seed=2), 0)
    assert procedure.content.startswith("Type the username") and len(procedure.behaviour.actions) == 3


def test_item_texts_keep_the_whole_goal_while_screen_signatures_stay_capped():
    from guimem.harness.episode import run_episode
    from guimem.memory.skills.induce import induce
    from guimem.memory.steer.propose import OfflineProposer
    from guimem.types import mask_text
    from tests.memory.conftest import ScriptPolicy

    traj = run_episode(FormEnv(), ScriptPolicy([USER, PASS, LOGIN]), Task(id="form", goal="", app="form", seed=1))
    goal = 'Enter the username "{v}" and the password "{v}", then press Login.'
    (procedure,) = OfflineProposer(OfflineContractParser()).propose(traj, 0)
    assert procedure.content.startswith(f"To '{goal}': ")
    assert all(goal in c.description for c in induce(traj))
    assert len(mask_text(goal)) == 40, "screen-signature tokens keep their 40-character cap"


@pytest.mark.parametrize("method", ["steer", "stack"])
def test_items_under_trial_are_labelled_as_such_never_as_verified(kit, method):
    from guimem.memory.kit import TRIAL_TITLE
    from guimem.memory.settings import MemorySpec
    from guimem.memory.stack import StackMemory

    mem = SteerMemory(kit) if method == "steer" else StackMemory(kit, MemorySpec())
    mem.learn(episode([USER, PASS, LOGIN], seed=1))
    mem.end_round()
    slot = next(s for s in range(2) if assign(content_id(next(iter(mem.items().values()))[0].key), 1, s) == "trial")
    inj = mem.recall(form_query(3, slot=slot))
    assert inj.items and all(i.trial for i in inj.items)
    assert inj.text.splitlines()[0] == TRIAL_TITLE and "verified" not in inj.text.split("\n", 1)[1].lower()
    assert "Verified knowledge" not in inj.text and "(verified)" not in inj.text


def test_warnings_on_different_states_of_one_screen_say_which_state_they_are_about():
    from guimem.memory.steer.propose import OfflineProposer

    proposer = OfflineProposer(OfflineContractParser())
    (empty,) = proposer.propose(episode([LOGIN], seed=1), 0)
    (half,) = proposer.propose(episode([USER, LOGIN], seed=1), 0)
    assert empty.content != half.content, "two states, two texts: nothing identical to tell apart"
    assert "(username empty, password empty)" in empty.content
    assert "(username filled, password empty)" in half.content


FORWARD = Task(id="email-inbox-forward", goal="Find the email by Lara and forward that email to Eve.", app="miniwob",
               params={"by": "Lara", "task": "forward", "to": "Eve"})
FORWARD_2 = Task(id="email-inbox-forward-nl", goal="Find the email by Ann and forward that email to Bo.",
                 app="miniwob", params={"by": "Ann", "task": "forward", "to": "Bo"})
REPLY = Task(id="email-inbox-reply", goal='Find the email by Ilka and reply to them with the text "Ac nisl.".',
             app="miniwob", params={"by": "Ilka", "task": "reply", "message": "Ac nisl."})
LOGIN_TASK = Task(id="login-user", goal='Enter the username "kiera" and the password "x9" into the text fields and '
                  "press login.", app="miniwob", params={"username": "kiera", "password": "x9"})


def test_the_contract_keeps_the_verb_a_task_value_names_and_its_roles():
    parser = OfflineContractParser()
    forward, reply = parser.parse(FORWARD), parser.parse(REPLY)
    assert (forward.action, forward.object, forward.source_role, forward.target_role) == \
        ("forward", "email", "sender", "recipient")
    assert reply.action == "reply" and reply.source_role == "sender"


def test_an_item_is_offered_to_a_sibling_whose_verb_fits_and_withheld_where_it_does_not():
    parser = OfflineContractParser()
    item = parser.parse(FORWARD)
    assert not conflicts(item, parser.parse(FORWARD_2)), "a sibling with the same verb and roles fits"
    assert conflicts(item, parser.parse(REPLY)), "forward is not reply"
    assert conflicts(item, parser.parse(LOGIN_TASK)), "an unrelated task of the same app does not fit"
