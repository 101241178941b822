from __future__ import annotations

from guimem.llm import LLMClient
from guimem.memory.base import RecallQuery
from guimem.memory.graph import GraphMemory
from guimem.memory.settings import GraphSettings, Structure
from guimem.memory.subgoals import Granularity, LLMAnnotator, LLMSegmenter, OfflineSegmenter
from guimem.testing import FormEnv, ScriptedLLM
from guimem.types import ItemKind, Task
from tests.memory.conftest import CANCEL, LOGIN, PASS, USER, episode


def query(seed=9):
    env = FormEnv()
    obs = env.reset(Task(id="form", goal="", app="form", seed=seed))
    return RecallQuery(task=env.task, observation=obs)


def test_recall_returns_successful_and_failed_edges_of_the_nearest_state(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.learn(episode([LOGIN], seed=2))
    assert g.recall(query()).items == (), "nothing learned in a round is recalled before its boundary"
    g.end_round()
    inj = g.recall(query())
    labels = {i.success for i in inj.items}
    assert labels == {True, False}
    assert all(i.kind is ItemKind.EDGE for i in inj.items)
    assert inj.tokens > 0 and "FAILED" in inj.text


def test_same_screen_across_seeds_merges_into_one_node(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.end_round()
    nodes_after_one = g.stats()["nodes"]
    g.learn(episode([USER, PASS, LOGIN], seed=3))
    g.end_round()
    assert g.stats()["nodes"] == nodes_after_one


def test_dedup_drops_the_later_equivalent_edge(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.end_round()
    once = g.stats()
    g.learn(episode([USER, PASS, LOGIN], seed=2))
    g.end_round()
    assert once.get("edges_yes", 0) >= 1 and g.stats() == once


def test_edges_generalise_values_into_parameters(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.end_round()
    (item,) = [i for i in g.recall(query()).items if i.success]
    typed = [a.text for a in item.behaviour.actions if a.text]
    assert typed == ["{username}", "{password}"]


def test_granularity_ablation_changes_the_number_of_edges(kit):
    trajectory = episode([USER, PASS, LOGIN], seed=1)
    counts = {g: len(OfflineSegmenter(g).segment(trajectory)) for g in Granularity}
    assert counts[Granularity.ACTION] == 3 and counts[Granularity.TASK] == 1
    assert 1 <= counts[Granularity.SUBGOAL] <= 3


def test_flat_structure_recalls_top_k_edges_by_source_screen(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95, structure=Structure.FLAT, flat_k=2,
                                       granularity=Granularity.ACTION))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.end_round()
    found = g.recall(query())
    assert len(found.items) + len(found.unfit) == 2
    assert len(found.unfit) == 1, "typing the password was learned with the username filled: not on the empty form"


def test_graph_survives_a_reopen(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, PASS, LOGIN], seed=1))
    g.end_round()
    again = GraphMemory(kit, GraphSettings(tau=0.95))
    assert again.stats() == g.stats() and again.recall(query()).items


def test_llm_segmenter_and_annotator_use_validated_replies(kit):
    llm: LLMClient = ScriptedLLM(['{"boundaries": [2]}',
                                  '{"text": "fill the form", "effect": "fields filled", "success": "yes"}',
                                  'oops', '{"text": "submit", "effect": "logged in", "success": "yes"}'])
    trajectory = episode([USER, PASS, LOGIN], seed=1)
    segments = LLMSegmenter(llm).segment(trajectory)
    assert [len(s.actions) for s in segments] == [2, 1]
    annotator = LLMAnnotator(llm)
    first = annotator.annotate(segments[0], trajectory, is_last=False)
    second = annotator.annotate(segments[1], trajectory, is_last=True)
    assert first.text == "fill the form" and second.effect == "logged in"
    assert len(first.behaviour.actions) == 2


def test_a_failed_episode_marks_its_last_subgoal_failed(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95))
    g.learn(episode([USER, CANCEL], seed=1))
    g.end_round()
    assert g.stats().get("edges_no", 0) >= 1


def test_leave_one_task_out_hides_an_edge_that_another_task_also_contributed(kit):
    g = GraphMemory(kit, GraphSettings(tau=0.95, exclude_source_task=True))
    g.learn(episode([USER, PASS, LOGIN], seed=1, task_id="form-a"))
    g.learn(episode([USER, PASS, LOGIN], seed=2, task_id="form-b"))  # the same subgoals: dropped as duplicates
    g.end_round()

    def shown(task_id):
        env = FormEnv()
        obs = env.reset(Task(id=task_id, goal="", app="form", seed=9))
        return [i for i in g.recall(RecallQuery(task=env.task, observation=obs)).items if i.success]

    assert shown("form-a") == [] and shown("form-b") == [], "an edge either task contributed is hidden from both"
    assert shown("form-c"), "a third task still gets it"


def test_a_task_that_follows_another_task_s_edge_where_memory_showed_it_is_not_made_its_source(kit):
    from guimem.memory.subgoals import OfflineSegmenter, shown_at
    from guimem.types import Action, ActionKind, Injection

    g = GraphMemory(kit, GraphSettings(tau=0.95, exclude_source_task=True))
    g.learn(episode([USER, PASS, LOGIN], seed=1, task_id="form-a"))
    g.end_round()
    edges = {i.id for i in g.recall(query()).items if i.success}
    followed = episode([USER, PASS, LOGIN], seed=2, task_id="form-b", memory=g, round_index=1)
    assert all(edges & shown_at(seg, followed) for seg in OfflineSegmenter().segment(followed)), "shown where done"
    # told by position: the step indices a trajectory states are its writer's
    g.learn(followed.model_copy(update={"steps": tuple(s.model_copy(update={"index": s.index + 100})
                                                       for s in followed.steps)}))
    g.learn(episode([USER, PASS, LOGIN], seed=3, task_id="form-c", round_index=1))  # found alone: a source
    # shown only at a step that performed nothing (a wait), not where the subgoal was done: a source too
    wait = followed.steps[0].model_copy(update={"action": Action(kind=ActionKind.WAIT)})
    rest = [s.model_copy(update={"injection": Injection(method="graph")}) for s in followed.steps]
    g.learn(followed.model_copy(update={"task": followed.task.model_copy(update={"id": "form-d"}),
                                        "steps": (wait, *rest), "episode_id": "d"}))
    g.end_round()

    def shown(task_id):
        env = FormEnv()
        obs = env.reset(Task(id=task_id, goal="", app="form", seed=9))
        return [i for i in g.recall(RecallQuery(task=env.task, observation=obs)).items if i.success]

    assert shown("form-b"), "following memory is a use: what transferred is not withdrawn for having worked"
    assert shown("form-c") == [], "a task that did the same without being shown it is a source, and it is hidden"
    assert shown("form-d") == [], "shown at a step that did not perform the subgoal is not following it"


def test_an_edge_learned_on_a_document_holding_the_task_s_text_advises_only_where_the_document_holds_it_too():
    """A "File; Save As" edge learned while saving a copy of a document that held the task's text is no step for a
    task that has yet to write its text (issue #35, transfer only: graph saved mousepad-edit-save's untouched
    document first; the unnamed document had no name to record its content by). A segment's own typing is no
    precondition."""
    from guimem.memory.generalise import Performed, TaskScreen
    from guimem.memory.kit import fields_bound_hold
    from guimem.memory.subgoals import Segment, behaviour_of
    from guimem.types import Outcome, Role, Trajectory
    from tests.memory.test_unused_steps import screen, tap, type_

    copy = Task(id="copy", goal="Save a copy as a.txt.", app="editor", seed=1, params={"text": "hi", "name": "a.txt"})
    traj = Trajectory(task=copy, steps=(), final_observation=screen(), outcome=Outcome(success=True, score=1.0))
    save_as = Segment((Performed(0, tap(Role.MENUITEM, "File"), screen(text="hi"), screen("File", text="hi"), False),
                       Performed(1, tap(Role.MENUITEM, "Open"), screen("File", text="hi"), screen(text="hi"), False)))
    edge = behaviour_of(save_as, traj)
    assert edge.fields == {"<textbox>": "{text}"}
    edit = Task(id="edit", goal='Replace the text with "yo" and save.', app="editor", seed=1, params={"text": "yo"})
    assert not fields_bound_hold(edge.fields, edge.roles, TaskScreen(edit, screen(text="draft"))), \
        "the text is yet to be written"
    assert fields_bound_hold(edge.fields, edge.roles, TaskScreen(edit, screen(text="yo")))
    typing = Segment((Performed(0, type_("hi"), screen(text="draft"), screen(text="hi"), False),))
    assert behaviour_of(typing, traj).fields == {}, "what the segment types into the document is its own doing"
