"""TaskContract: what a task asks for, parsed offline (rules) or by an LLM, and the conflict filter."""

from __future__ import annotations

import re
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from guimem.llm import LLMClient, complete_json, text_message
from guimem.llm.prompts import template
from guimem.memory.generalise import VERBS, goal_verb, state_masks, verbs_conflict
from guimem.types import Task, mask_text

OBJECTS = ("email", "message", "tweet", "post", "user", "flight", "ticket", "folder", "file", "tab", "link",
           "button", "checkbox", "option", "list", "item", "date", "time", "password", "username", "text",
           "field", "textbox", "result", "tree", "dialog", "menu", "widget", "tag", "shape", "color")
_COMPLETION = re.compile(r"\b(?:press|click|hit|tap)(?: on)?(?: the)? [\"“]?([A-Za-z ]{2,20}?)[\"”]?(?: button)?[.,]?$",
                         re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


class TaskContract(BaseModel):
    """The parts of a task that decide which knowledge fits it."""

    model_config = ConfigDict(frozen=True)

    app: str = ""
    source_role: str = ""
    target_role: str = ""
    action: str = ""
    object: str = ""
    constraints: tuple[str, ...] = Field(default_factory=tuple)
    completion: str = ""


class ContractParser(Protocol):
    """Parses a task into a contract."""

    def parse(self, task: Task) -> TaskContract:
        """The task's contract."""
        ...


class OfflineContractParser:
    """Rules over the goal text (task values masked): verb lexicon, object nouns, roles, completion."""

    def parse(self, task: Task) -> TaskContract:
        """Parse deterministically. A task value that is itself a verb of the lexicon (``task: forward``) is
        what the task asks to do, not a volatile name: `state_masks` leaves it unmasked, so siblings keep
        their verbs."""
        masks = state_masks(task)
        goal = mask_text(task.goal, masks, limit=None).lower()  # the whole goal: roles often come last
        words = _WORD.findall(goal)
        action = goal_verb(task)
        obj = next((w.rstrip("s") for w in words if w.rstrip("s") in OBJECTS and w not in VERBS), "")
        m = _COMPLETION.search(task.goal.strip())
        completion = f"press:{m.group(1).strip().lower()}" if m else ""
        source = "sender" if re.search(r"\b(by|from)\b", goal) else ""
        target = "recipient" if re.search(r"\bto\b {v}|\bto:", goal) else ""
        return TaskContract(app=task.app, source_role=source, target_role=target, action=action, object=obj,
                            constraints=tuple(sorted(task.params)), completion=completion)


class LLMContractParser:
    """Ask a model to fill the contract (``prompts/contract.txt``); the reply is schema-validated."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def parse(self, task: Task) -> TaskContract:
        """Parse with the model."""
        prompt = template("contract").format(goal=task.goal, app=task.app, params=sorted(task.params))
        parsed = complete_json(self.client, [text_message("user", prompt)], TaskContract)
        return parsed.model_copy(update={"app": task.app})


def conflicts(item: TaskContract, task: TaskContract) -> list[str]:
    """Why an item's contract conflicts with a task's (empty when compatible)."""
    reasons = []
    if item.app and task.app and item.app != task.app:
        reasons.append(f"app {item.app} vs {task.app}")
    if verbs_conflict(item.action, task.action):
        reasons.append(f"action {item.action} vs {task.action}")
    if item.object and task.object and item.object != task.object:
        reasons.append(f"object {item.object} vs {task.object}")
    if item.completion and task.completion and item.completion != task.completion:
        reasons.append(f"completion {item.completion} vs {task.completion}")
    roles, other = (item.source_role, item.target_role), (task.source_role, task.target_role)
    if any(roles) and any(other) and roles != other:
        reasons.append(f"roles {'/'.join(roles)} vs {'/'.join(other)}")
    return reasons
