"""Desktop tasks: a goal, the app to start, the files to set up, and a checker that reads real state.

A `DesktopTask` is data: its values are drawn from the task's own seeded generator (`NumberParam`,
`ChoiceParam`), its goal and files are templates over them, and its check reads what the app really
did, a file's content on disk (`FileCheck`) or the calculator's display through AT-SPI
(`DisplayCheck`). Paths are relative to the session's home folder.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from guimem.errors import SuiteError
from guimem.types import fill

_EXPRESSION = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*$")


class NumberParam(BaseModel):
    """An integer drawn uniformly from ``low``..``high``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["number"] = "number"
    low: int
    high: int

    def draw(self, rng: random.Random) -> str:
        """One value."""
        return str(rng.randint(self.low, self.high))


class ChoiceParam(BaseModel):
    """One of ``options``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["choice"] = "choice"
    options: tuple[str, ...] = Field(min_length=1)

    def draw(self, rng: random.Random) -> str:
        """One value."""
        return rng.choice(self.options)


Param = Annotated[NumberParam | ChoiceParam, Field(discriminator="kind")]


class SetupFile(BaseModel):
    """A file (or, with ``folder``, a folder) made before the app starts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    content: str = ""
    folder: bool = False


class FileCheck(BaseModel):
    """Success when the file at ``path`` holds ``content`` (a trailing newline is ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["file"] = "file"
    path: str
    content: str

    def passed(self, home: Path, params: dict[str, str], display: str | None) -> tuple[bool, str]:
        """Whether it holds, and why."""
        path = home / fill(self.path, params)
        want = fill(self.content, params)
        try:
            have = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False, f"{fill(self.path, params)} does not exist"
        if have.rstrip("\n") != want:
            return False, f"{fill(self.path, params)} holds {have[:60]!r}, not {want!r}"
        return True, f"{fill(self.path, params)} holds {want!r}"


class DisplayCheck(BaseModel):
    """Success when the calculator's display shows the value of ``expression`` (``a op b``, integers)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["display"] = "display"
    expression: str

    def expected(self, params: dict[str, str]) -> str:
        """The value the display must show."""
        match = _EXPRESSION.match(fill(self.expression, params))
        if match is None:
            raise SuiteError(f"not an 'a op b' expression: {self.expression!r}", field="check.expression")
        a, op, b = int(match.group(1)), match.group(2), int(match.group(3))
        return str({"+": a + b, "-": a - b, "*": a * b}[op])

    def passed(self, home: Path, params: dict[str, str], display: str | None) -> tuple[bool, str]:
        """Whether it holds, and why."""
        want = self.expected(params)
        shown = (display or "").strip().replace(",", "")
        if shown == want:
            return True, f"the display shows {want}"
        return False, f"the display shows {shown!r}, not {want}"


Check = Annotated[FileCheck | DisplayCheck, Field(discriminator="kind")]


class DesktopTask(BaseModel):
    """One desktop task.

    Attributes:
        id: The task's name in suites.
        app: The application (a key of `APPS`).
        goal: The goal, a template over the params.
        params: How each value is drawn from the task's seed.
        args: The app's arguments (templates; paths relative to the home folder are made absolute).
        files: Files and folders made before the app starts.
        check: What success means.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    app: str
    goal: str
    params: dict[str, Param] = Field(default_factory=dict)
    args: tuple[str, ...] = ()
    files: tuple[SetupFile, ...] = ()
    check: Check

    def values(self, seed: int) -> dict[str, str]:
        """The task's values for ``seed`` (the same seed, the same values)."""
        rng = random.Random(f"{self.id}#{seed}")
        return {name: param.draw(rng) for name, param in sorted(self.params.items())}


class AppSpec(BaseModel):
    """How an application is started, and what its main window is called.

    Attributes:
        name: Its name in tasks and observations.
        argv: The command (the task's args follow).
        window: A substring of its main window's title, to know it is up.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    argv: tuple[str, ...]
    window: str


APPS = {
    "galculator": AppSpec(name="galculator", argv=("galculator",), window="galculator"),
    "mousepad": AppSpec(name="mousepad", argv=("mousepad", "--disable-server"), window="Mousepad"),
    "gedit": AppSpec(name="gedit", argv=("gedit", "--standalone"), window="gedit"),
}

_PHRASES = ChoiceParam(options=("meeting at noon", "buy more coffee", "call the plumber", "ship the parcel",
                                "water the plants", "book the train"))
_NAMES = ChoiceParam(options=("plan.txt", "todo.txt", "memo.txt", "list.txt"))
_FOLDERS = ChoiceParam(options=("reports", "letters", "drafts"))
_FOLDER_FILES = tuple(SetupFile(path=name, folder=True) for name in _FOLDERS.options)

def _editor_tasks(app: str, leave: str) -> tuple[DesktopTask, ...]:
    """The tasks both text editors share (the same goals and checks; "{leave} the editor" is how each names
    closing its window)."""
    draft = (SetupFile(path="notes.txt", content="first draft\n"),)
    every = {"text": _PHRASES, "name": _NAMES, "folder": _FOLDERS}
    return (
        DesktopTask(id=f"{app}-edit-save", app=app,
                    goal='Replace the text of notes.txt with "{text}" and save the file.',
                    params={"text": _PHRASES}, args=("notes.txt",), files=draft,
                    check=FileCheck(path="notes.txt", content="{text}")),
        DesktopTask(id=f"{app}-save-as", app=app,
                    goal='Write "{text}" in the new document and save it as {name} in the folder {folder}.',
                    params=every, files=_FOLDER_FILES, check=FileCheck(path="{folder}/{name}", content="{text}")),
        DesktopTask(id=f"{app}-save-copy", app=app,
                    goal="Save a copy of notes.txt as {name} in the folder {folder}.",
                    params=every, args=("notes.txt",),
                    files=(SetupFile(path="notes.txt", content="{text}\n"), *_FOLDER_FILES),
                    check=FileCheck(path="{folder}/{name}", content="{text}")),
        DesktopTask(id=f"{app}-quit-save", app=app,
                    goal=f'Replace the text of notes.txt with "{{text}}", then {leave} the editor, keeping the change.',
                    params={"text": _PHRASES}, args=("notes.txt",), files=draft,
                    check=FileCheck(path="notes.txt", content="{text}")),
        DesktopTask(id=f"{app}-save-home", app=app,
                    goal='Write "{text}" in the new document and save it in the home folder as {name}.',
                    params={"text": _PHRASES, "name": _NAMES}, files=_FOLDER_FILES,
                    check=FileCheck(path="{name}", content="{text}")),
        DesktopTask(id=f"{app}-open-edit", app=app,
                    goal='Open the file {name} in the folder {folder}, replace its text with "{text}" and save it.',
                    params=every, files=(*_FOLDER_FILES, SetupFile(path="{folder}/{name}", content="first draft\n")),
                    check=FileCheck(path="{folder}/{name}", content="{text}")),
        DesktopTask(id=f"{app}-quit-save-new", app=app,
                    goal=f'Write "{{text}}" in the new document, then {leave} the editor, keeping it as {{name}} in '
                         'the folder {folder}.',
                    params=every, files=_FOLDER_FILES, check=FileCheck(path="{folder}/{name}", content="{text}")),
    )


TASKS: dict[str, DesktopTask] = {t.id: t for t in (
    DesktopTask(id="calc-add", app="galculator", goal="Use the calculator to add {a} and {b}.",
                params={"a": NumberParam(low=12, high=98), "b": NumberParam(low=12, high=98)},
                check=DisplayCheck(expression="{a} + {b}")),
    DesktopTask(id="calc-multiply", app="galculator", goal="Use the calculator to multiply {a} by {b}.",
                params={"a": NumberParam(low=3, high=19), "b": NumberParam(low=3, high=19)},
                check=DisplayCheck(expression="{a} * {b}")),
    DesktopTask(id="calc-subtract", app="galculator", goal="Use the calculator to subtract {b} from {a}.",
                params={"a": NumberParam(low=50, high=99), "b": NumberParam(low=11, high=49)},
                check=DisplayCheck(expression="{a} - {b}")),
    *_editor_tasks("mousepad", "quit"),
    *_editor_tasks("gedit", "close"),
)}


def desktop_task(task_id: str) -> DesktopTask:
    """The task named ``task_id``.

    Raises:
        SuiteError: No such task (with "did you mean").
    """
    if task_id in TASKS:
        return TASKS[task_id]
    import difflib

    close = difflib.get_close_matches(task_id, list(TASKS), n=3)
    raise SuiteError(f"unknown desktop task {task_id!r}",
                     suggestion=f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(TASKS)}")


def setup_files(task: DesktopTask, home: Path, params: dict[str, str]) -> None:
    """Make the task's files and folders under ``home``."""
    for spec in task.files:
        path = home / fill(spec.path, params)
        if spec.folder:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(fill(spec.content, params), encoding="utf-8")


def app_argv(task: DesktopTask, home: Path, params: dict[str, str]) -> list[str]:
    """The command that starts the task's app."""
    args = [fill(a, params) for a in task.args]
    return [*APPS[task.app].argv, *(str(home / a) if not a.startswith("-") else a for a in args)]

