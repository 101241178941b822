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
