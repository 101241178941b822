"""The README's Python example runs as written (in a fresh folder, on real MiniWoB++ in headless Chromium)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.browser
def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch, capsys):
    section = README.read_text().split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "tokens)" in out
    assert any(status in out for status in ("candidate", "trial", "admitted")), out
    # honest labels: an item still under trial is never printed under a "verified" heading
    if "'admitted'" not in out:
        assert "Verified knowledge" not in out, out
    print(out)
    assert (tmp_path / "memory.sqlite").exists()


def test_every_command_line_of_the_readme_names_a_command_and_options_it_has():
    """Each `guimem ...` line of the README's CLI tour: its sub-command exists and takes every --option the
    line gives (`--help` lists it), so the tour cannot drift from the CLI."""
    import re

    from typer.testing import CliRunner

    from guimem.cli.app import app

    tour = README.read_text().split("## The CLI", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0] for line in tour.splitlines() if line.startswith("guimem ")]
    assert len(lines) >= 15
    runner = CliRunner()
    for line in lines:
        name = line.split()[1]
        command = ["memory", "stats"] if name == "memory" else [name]  # memory's sub-commands share their options
        shown = runner.invoke(app, [*command, "--help"], terminal_width=200)
        assert shown.exit_code == 0, (line, shown.output)
        helptext = " ".join(shown.output.split())
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
            if option != "--help":
                assert option in helptext, f"{line.strip()!r}: {option} is not an option of guimem {name}"
