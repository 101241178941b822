"""Proposals: successful trajectories propose procedures, failed ones propose warnings."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from guimem.llm import LLMClient, complete_json, text_message
from guimem.llm.prompts import template
from guimem.memory.generalise import (
    Performed,
    direct_path,
    generalise_action,
    goal_verb,
    performed_actions,
    state_masks,
    state_qualifier,
    state_text,
    template_key,
)
from guimem.memory.roles import roles_of
from guimem.memory.steer.contract import ContractParser
from guimem.memory.steer.items import Applicability, KnowledgeItem, Provenance, Scope
from guimem.types import Behaviour, Origin, Trajectory, mask_text


class Proposer(Protocol):
    """Turns one trajectory into zero or more candidate items."""

    def propose(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        """The proposals."""
        ...


def culprit(performed: list[Performed], traj: Trajectory) -> int | None:
    """The index of the action that went wrong: the first that errored, else the one that ended a
    failed episode with a negative score (a wrong submission). None when nothing can be blamed
    (e.g. the step budget ran out)."""
    for i, p in enumerate(performed):
        if p.failed:
            return i
    if performed and traj.outcome.score < 0:
        return len(performed) - 1
    return None


def _procedure(traj: Trajectory, performed: list[Performed], parser: ContractParser, round_index: int,
               content: str | None = None) -> KnowledgeItem:
    steps = tuple(generalise_action(p.action, traj.task) for p in direct_path(performed, traj.task) if not p.failed)
    goal = mask_text(traj.task.goal, state_masks(traj.task), limit=None)
    text = content or f"To '{goal}': " + "; ".join(f"{i + 1}) {a.describe()}" for i, a in enumerate(steps))
    contract = parser.parse(traj.task)
    return KnowledgeItem(
        kind="procedure", applicability=Applicability(app=traj.task.app, task=traj.task.id, contract=contract),
        completion=contract.completion or "task reward 1", scope=Scope.TASK, content=text,
        behaviour=Behaviour(actions=steps, roles=roles_of(steps, traj.task), serves=goal_verb(traj.task)),
        key=f"procedure|{traj.task.id}|{template_key(steps)}",
        provenance=Provenance(episodes=[traj.episode_id], tasks=[traj.task.id], outcomes=[True]),
        created_round=round_index, origin=Origin.ACTION if content is None else Origin.MODEL,
    )


def _warning(traj: Trajectory, performed: list[Performed], index: int, parser: ContractParser, round_index: int,
             content: str | None = None) -> KnowledgeItem:
    bad = performed[index]
    template = generalise_action(bad.action, traj.task)
    state = state_text(bad.before, traj.task)
    why = traj.outcome.reason or f"score {traj.outcome.score:+.1f}"
    qualifier = state_qualifier(bad.before, traj.task)
    where = f"in this state ({qualifier})" if qualifier else "in this state"
    text = content or (f"On the {bad.before.location or bad.before.app} screen, do not {template.describe()} "
                       f"{where}: it led to failure ({why}).")
    contract = parser.parse(traj.task)
    return KnowledgeItem(
        kind="warning", applicability=Applicability(app=traj.task.app, task=traj.task.id, contract=contract,
                                                    state=state),
        completion=contract.completion or "task reward 1", scope=Scope.TASK, content=text,
        behaviour=Behaviour(actions=(template,), avoid=True, roles=roles_of([template], traj.task),
                            serves=goal_verb(traj.task) if index == len(performed) - 1 and not bad.failed else ""),
        key=f"warning|{traj.task.id}|{template_key([template])}|{state}",
        provenance=Provenance(episodes=[traj.episode_id], tasks=[traj.task.id], outcomes=[False]),
        created_round=round_index, origin=Origin.ACTION if content is None else Origin.MODEL,
        # the reason is the page's own (MiniWoB's and BrowserGym's reward reason): page text, screened and quoted
        page=[s for s in (bad.before.location, qualifier, traj.outcome.reason) if s],
    )


class OfflineProposer:
    """Deterministic proposals: the generalised action sequence, or the culprit action and its screen."""

    def __init__(self, parser: ContractParser) -> None:
        self.parser = parser

    def propose(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        """One procedure per success, one warning per failure that has a culprit."""
        performed = performed_actions(traj)
        if not performed:
            return []
        if traj.outcome.success:
            return [_procedure(traj, performed, self.parser, round_index)]
        index = culprit(performed, traj)
        return [] if index is None else [_warning(traj, performed, index, self.parser, round_index)]


class Distilled(BaseModel):
    """The LLM proposer's reply."""

    content: str
    culprit_index: int = -1


class LLMProposer:
    """A model writes the advice text (and names the culprit of a failure); behaviour stays recorded."""

    def __init__(self, client: LLMClient, parser: ContractParser) -> None:
        self.client = client
        self.parser = parser

    def propose(self, traj: Trajectory, round_index: int) -> list[KnowledgeItem]:
        """Ask the model, validate, build the item."""
        performed = performed_actions(traj)
        if not performed:
            return []
        lines = "\n".join(f"{i}. {p.action.describe()}  [{p.before.location}]" for i, p in enumerate(performed))
        outcome = "success" if traj.outcome.success else f"failure ({traj.outcome.reason})"
        prompt = template("propose").format(goal=traj.task.goal, outcome=outcome, actions=lines)
        reply = complete_json(self.client, [text_message("user", prompt)], Distilled)
        if traj.outcome.success:
            return [_procedure(traj, performed, self.parser, round_index, reply.content)]
        index = reply.culprit_index if 0 <= reply.culprit_index < len(performed) else culprit(performed, traj)
        return [] if index is None else [_warning(traj, performed, index, self.parser, round_index, reply.content)]
