"""The BPE token counter and its memo of short texts."""

from __future__ import annotations

from guimem import tokens
from guimem.tokens import TiktokenCounter


def test_counts_are_the_same_from_the_memo_and_it_stays_bounded(monkeypatch):
    monkeypatch.setattr(tokens, "MEMO_TEXTS", 50)
    memo, plain = TiktokenCounter(), TiktokenCounter()
    texts = [f"tap(button \"Submit {i}\") when the form is empty" for i in range(120)] + ["", "x" * 600, "héllo 🙂"]
    first = [memo.count(t) for t in texts]
    again = [memo.count(t) for t in texts]
    plain._memo = _Forgetful()  # counts every time
    assert first == again == [plain.count(t) for t in texts]
    assert 0 < len(memo._memo) <= 50
    assert "x" * 600 not in memo._memo  # a long text (a page, a prompt) is not kept


class _Forgetful(dict):
    def __setitem__(self, key, value) -> None:
        pass
