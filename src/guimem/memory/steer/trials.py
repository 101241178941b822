"""Trials against matched controls: deterministic balanced assignment, evidence, and the admission gate."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

from guimem.memory.generalise import generalise_action, performed_actions, state_text, template_key
from guimem.memory.settings import GateSettings
from guimem.memory.steer.items import Evidence, ItemStatus, KnowledgeItem, TrialRecord
from guimem.types import Trajectory

Arm = Literal["trial", "control"]


def assign(item_id: str, round_index: int, slot: int) -> Arm:
    """Trial or control for an item in the ``slot``-th occurrence of a task within a round.

    Alternating on the slot makes the arms balanced within every task (two seeds of a task in a
    round: one trial, one control); the round flips which seed gets which arm; the item's hash
    decorrelates items. Deterministic: the same run gives the same assignment.
    """
    parity = (slot + round_index + zlib.crc32(item_id.encode())) % 2
    return "trial" if parity == 0 else "control"


def effective_use(item: KnowledgeItem, traj: Trajectory) -> bool:
    """Did the agent act on the item? Procedures: at least half of its steps were performed.
    Warnings: on the screen state the warning is about, the warned action was not performed (a
    warning about tapping Login on an empty form is heeded by filling the form first)."""
    performed = performed_actions(traj)
    wanted = [template_key([a]) for a in item.behaviour.actions]
    if item.kind == "warning":
        state = item.applicability.state
        relevant = [p for p in performed if not state or state_text(p.before, traj.task) == state]
        return not any(template_key([generalise_action(p.action, traj.task)]) in wanted for p in relevant)
    done = {template_key([generalise_action(p.action, traj.task)]) for p in performed}
    hits = sum(1 for w in wanted if w in done)
    return bool(wanted) and hits * 2 >= len(wanted)


def record(item: KnowledgeItem, traj: Trajectory, arm: Arm, round_index: int) -> TrialRecord:
    """The evidence one episode gives about one item."""
    return TrialRecord(episode=traj.episode_id, task=traj.task.id, seed=traj.task.seed, round=round_index, arm=arm,
                       score=1.0 if traj.outcome.success else 0.0,
                       effective=arm == "trial" and effective_use(item, traj))


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict on one item and the reasons it is held back, if it is."""

    status: ItemStatus
    reasons: tuple[str, ...]


def gate(evidence: Evidence, current: ItemStatus, settings: GateSettings) -> GateDecision:
    """Admit, reject, or keep pending (and why)."""
    if current not in (ItemStatus.CANDIDATE, ItemStatus.TRIAL):
        return GateDecision(current, ())
    if evidence.harms > settings.max_harms:
        return GateDecision(ItemStatus.REJECTED, (f"{evidence.harms} harm(s) observed",))
    trials, controls = len(evidence.arm("trial")), len(evidence.arm("control"))
    reasons = []
    if trials < settings.min_trials:
        reasons.append(f"{trials} trial(s) < {settings.min_trials}")
    if controls < settings.min_controls:
        reasons.append(f"{controls} control(s) < {settings.min_controls}")
    if evidence.score_difference <= settings.min_difference:
        reasons.append(f"trial - control = {evidence.score_difference:+.2f} is not > {settings.min_difference}")
    if evidence.effective_uses < settings.min_effective_uses:
        reasons.append(f"{evidence.effective_uses} effective use(s) < {settings.min_effective_uses}")
    if reasons:
        return GateDecision(ItemStatus.TRIAL if trials else current, tuple(reasons))
    return GateDecision(ItemStatus.ADMITTED, ())
