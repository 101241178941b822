"""Log-likelihoods of many continuations of one prompt in one llama.cpp pass, the continuations as a token trie.

Scoring each continuation after the prompt one by one decodes a few tokens per call, and a call costs far more
than its tokens (0.2 s for a dozen tokens of SmolLM2-135M on 2 cores). Here the continuations of a group go
into one batch as a trie: a token shared by several continuations (``tap(button "``) is decoded once, tagged
with every continuation's sequence id, and attends to the prompt and its own ancestors only (llama.cpp masks
attention by sequence and position, and a trie node's sequences share its ancestors). The prompt stays in the
cache between calls: a prompt that starts like the previous one decodes only what differs.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from guimem.errors import ModelRuntimeError

MAX_SEQUENCES = 64


@dataclass
class _Node:
    token: int
    depth: int
    seqs: list[int] = field(default_factory=list)
    next: set[int] = field(default_factory=set)
    """The tokens that follow it in some continuation: its logits are read for these only."""


@dataclass
class _Trie:
    nodes: list[_Node] = field(default_factory=list)
    paths: list[list[int]] = field(default_factory=list)
    index: dict[tuple[int, int], int] = field(default_factory=dict)

    def add(self, tail: list[int], seq: int) -> None:
        parent, path = -1, []
        for depth, token in enumerate(tail):
            at = self.index.get((parent, token))
            if at is None:
                at = self.index[(parent, token)] = len(self.nodes)
                self.nodes.append(_Node(token, depth))
            self.nodes[at].seqs.append(seq)
            path.append(at)
            parent = at
        for at, token in zip(path[:-1], tail[1:], strict=True):  # a node's logits predict the next token
            self.nodes[at].next.add(token)
        self.paths.append(path)


class ContinuationScorer:
    """Mean log-probability of continuations after a prompt, on its own llama.cpp context of a loaded model.

    Args:
        model: The ``llama_cpp.Llama`` whose weights (and vocabulary) to use; its own context is not touched.
        n_ctx: Cells of this scorer's cache: the prompt plus one group's trie must fit.
        threads: CPU threads for llama.cpp.
    """

    def __init__(self, model: Any, n_ctx: int, threads: int) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._model = model  # held: the weights must outlive this context
        if llama_cpp.llama_model_is_recurrent(model.model) or llama_cpp.llama_model_is_hybrid(model.model):
            raise ModelRuntimeError("continuations are scored as a trie of sequences sharing a prompt, which a "
                                    "recurrent or hybrid model's state cannot hold",
                                    suggestion="use a transformer GGUF")
        self.n_vocab = int(llama_cpp.llama_n_vocab(llama_cpp.llama_model_get_vocab(model.model)))
        self.n_ctx = n_ctx
        self.max_seqs = min(MAX_SEQUENCES, int(llama_cpp.llama_max_parallel_sequences()))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = params.n_batch = n_ctx
        params.n_ubatch = min(512, n_ctx)
        params.n_seq_max = self.max_seqs
        params.kv_unified = True  # one cache of n_ctx cells shared by every sequence (the prompt is in all)
        params.n_threads = params.n_threads_batch = threads
        # as llama_cpp.Llama's default: flash attention's f16 accumulation moves a score by up to 0.1 here
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self._ctx = llama_cpp.llama_init_from_model(model.model, params)
        if not self._ctx:
            raise ModelRuntimeError(f"llama.cpp could not make a scoring context of {n_ctx} cells")
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_ctx, 0, self.max_seqs)
        self._cached: list[int] = []  # the prompt tokens held in sequence 0

    def close(self) -> None:
        """Free the context and the batch (scoring after that raises `ModelRuntimeError`)."""
        if self._ctx:
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = self._mem = None

    def forget(self) -> None:
        """Drop the cached prompt: the next call decodes its prompt whole."""
        self._cached = []
        if self._ctx:
            self._lib.llama_memory_clear(self._mem, True)

    def __del__(self) -> None:
        with contextlib.suppress(AttributeError, TypeError):  # at interpreter exit the binding may be gone first
            self.close()

    def mean_logprobs(self, head: list[int], tails: list[list[int]]) -> list[float]:
        """The mean log-probability of each tail's tokens after ``head`` (``-inf`` for an empty tail).

        Raises:
            ModelRuntimeError: ``head`` and a tail do not fit the context, or llama.cpp failed to decode.
        """
        if not self._ctx:
            raise ModelRuntimeError("the scorer was closed")
        if not head:
            raise ModelRuntimeError("a continuation is scored after a prompt of at least one token")
        longest = max(map(len, tails), default=0)
        if len(head) + longest > self.n_ctx:
            raise ModelRuntimeError(f"a prompt of {len(head)} tokens and a continuation of {longest} exceed the "
                                    f"context ({self.n_ctx} tokens)")
        last = self._prompt(head)
        out = [-math.inf] * len(tails)
        group: list[int] = []
        room, used = self.n_ctx - len(head), 0  # a group's trie has at most the sum of its tails' tokens
        for i, tail in enumerate(tails):
            if tail and (len(group) == self.max_seqs - 1 or used + len(tail) > room):
                self._group(len(head), last, [tails[g] for g in group], group, out)
                group, used = [], 0
            if tail:
                group.append(i)
                used += len(tail)
        if group:
            self._group(len(head), last, [tails[g] for g in group], group, out)
        return out

    def _prompt(self, head: list[int]) -> np.ndarray:
        """Decode what of ``head`` the cache does not hold; the log-softmax after its last token."""
        keep = 0
        for a, b in zip(self._cached, head[:-1], strict=False):  # the last token is decoded again for its logits
            if a != b:
                break
            keep += 1
        lib = self._lib
        if not lib.llama_memory_seq_rm(self._mem, -1, keep, -1):  # a cache that cannot drop a part: start over
            self.forget()
            keep = 0
        self._cached = self._cached[:keep]
        self._fill([(t, p, [0], p == len(head) - 1) for p, t in enumerate(head) if p >= keep])
        self._cached = list(head)
        row = self._logits(self._batch.n_tokens - 1)
        return row - _logsumexp(row)

    def _group(self, offset: int, last: np.ndarray, tails: list[list[int]], where: list[int],
               out: list[float]) -> None:
        lib = self._lib
        trie = _Trie()
        for seq, tail in enumerate(tails, start=1):
            lib.llama_memory_seq_cp(self._mem, 0, seq, -1, -1)
            trie.add(tail, seq)
        self._fill([(n.token, offset + n.depth, n.seqs, bool(n.next)) for n in trie.nodes])
        logprob: dict[tuple[int, int], float] = {}  # (node, next token): only what a continuation needs
        for at, node in enumerate(trie.nodes):
            if node.next:
                row = self._logits(at)
                logz = _logsumexp(row)
                logprob.update({(at, t): float(row[t]) - logz for t in node.next})
        for i, tail, path in zip(where, tails, trie.paths, strict=True):
            out[i] = float(np.mean([last[tail[0]], *(logprob[(at, t)] for at, t in zip(path, tail[1:], strict=False))]))
        for seq in range(1, len(tails) + 1):
            lib.llama_memory_seq_rm(self._mem, seq, -1, -1)

    def _fill(self, entries: list[tuple[int, int, list[int], bool]]) -> None:
        """Decode one batch of (token, position, sequence ids, logits wanted)."""
        if len(entries) > self.n_ctx:  # the batch holds n_ctx entries: never write past it
            raise ModelRuntimeError(f"a batch of {len(entries)} tokens exceeds the context ({self.n_ctx})")
        batch = self._batch
        for i, (token, pos, seqs, logits) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seqs)
            for k, seq in enumerate(seqs):
                batch.seq_id[i][k] = seq
            batch.logits[i] = logits
        batch.n_tokens = len(entries)
        status = self._lib.llama_decode(self._ctx, batch)
        if status != 0:
            self.forget()
            raise ModelRuntimeError(f"llama.cpp failed to decode a batch of {len(entries)} tokens (status {status})")

    def _logits(self, i: int) -> np.ndarray:
        """The logits after batch entry ``i`` (a copy: the next decode overwrites llama.cpp's buffer)."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, i)
        row: np.ndarray = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)
        return row


def _logsumexp(row: np.ndarray) -> float:
    top = float(row.max())
    return top + math.log(float(np.exp(row - top).sum()))
