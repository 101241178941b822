"""The shipped ``families`` suite (for transfer) and its two halves, drawn by the rule their description states."""

from __future__ import annotations

from guimem.tasks.suites import load_suite

FAMILIES = ("email-inbox", "choose-date", "book-flight", "social-media", "use-autocomplete", "login-user", "copy-paste",
            "click-dialog", "focus-text", "click-pie")


def _family(task: str) -> str:
    return max((f for f in FAMILIES if task == f or task.startswith(f + "-")), key=len)


def test_families_holds_sibling_tasks_with_two_seeds_and_none_of_unseen():
    suite = load_suite("families")
    tasks = {e.task for e in suite.tasks}
    assert len(tasks) == 30 and len(suite.tasks) == 60
    assert {_family(t) for t in tasks} == set(FAMILIES)
    assert sum(t.startswith("email-inbox") for t in tasks) == 10
    assert not tasks & {e.task for e in load_suite("unseen").tasks}
    assert "transfer" in suite.description


def test_the_halves_split_every_family_by_the_written_rule():
    learn = [e.task for e in load_suite("families-learn").tasks]
    test = [e.task for e in load_suite("families-test").tasks]
    everything = sorted({e.task for e in load_suite("families").tasks})
    assert not set(learn) & set(test) and sorted(set(learn) | set(test)) == everything
    for family in FAMILIES:
        members = sorted(t for t in everything if _family(t) == family)
        assert {t for t in members[0::2]} <= set(learn) and {t for t in members[1::2]} <= set(test)
