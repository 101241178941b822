from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from guimem.types import MatchStatus, Observation, Role, Selector, UIElement
from tests.conftest import login_screen


def test_selector_resolves_by_label_regardless_of_ref_numbering():
    sel = Selector(role=Role.TEXTBOX, label="Username")
    first = login_screen()
    renumbered = Observation(app=first.app, location=first.location, elements=tuple(
        e.model_copy(update={"ref": str(int(e.ref) + 100)}) for e in first.elements))
    assert sel.resolve(first).element.ref == "2"
    assert sel.resolve(renumbered).element.ref == "102"


def test_selector_with_placeholder_binds_task_params():
    obs = Observation(app="w", elements=(UIElement(ref="1", role=Role.LINK, text="Ipsum", clickable=True),))
    sel = Selector(role=Role.LINK, text="{target}")
    assert sel.resolve(obs, {"target": "ipsum"}).ok
    unbound = sel.resolve(obs, {})
    assert unbound.status is MatchStatus.UNBOUND and unbound.missing_params == ("target",)


def test_selector_reports_ambiguity_and_no_match():
    obs = Observation(app="w", elements=(
        UIElement(ref="1", role=Role.BUTTON, text="OK", clickable=True),
        UIElement(ref="2", role=Role.BUTTON, text="ok", clickable=True),
    ))
    amb = Selector(role=Role.BUTTON, text="OK").resolve(obs)
    assert amb.status is MatchStatus.AMBIGUOUS and amb.candidates == 2
    assert Selector(role=Role.BUTTON, text="OK", nth=1).resolve(obs).element.ref == "2"
    assert Selector(role=Role.LINK, text="OK").resolve(obs).status is MatchStatus.NO_MATCH


def test_for_element_adds_nth_only_when_needed():
    obs = Observation(app="w", elements=(
        UIElement(ref="1", role=Role.BUTTON, text="OK", clickable=True),
        UIElement(ref="2", role=Role.BUTTON, text="OK", clickable=True),
        UIElement(ref="3", role=Role.BUTTON, text="Cancel", clickable=True),
    ))
    assert Selector.for_element(obs.elements[1], obs).nth == 1
    assert Selector.for_element(obs.elements[2], obs).nth is None


@given(st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and "{" not in s))
def test_for_element_always_resolves_back_to_the_same_element(text):
    obs = Observation(app="w", elements=(
        UIElement(ref="a", role=Role.BUTTON, text=text, clickable=True),
        UIElement(ref="b", role=Role.BUTTON, text=text, clickable=True),
        UIElement(ref="c", role=Role.LINK, text=text, clickable=True),
    ))
    for el in obs.elements:
        assert Selector.for_element(el, obs).resolve(obs).element.ref == el.ref


def test_a_selector_learned_on_an_unnamed_element_does_not_name_a_named_one():
    """A document's unnamed text box gives ``textbox ""``; it must not resolve to a dialog's "Name" field (the
    desktop harm: a routine typed its file name into the document instead of the dialog, or the other way)."""
    editor = Observation(app="mousepad", elements=(UIElement(ref="1", role=Role.TEXTBOX, editable=True),))
    sel = Selector.for_element(editor.elements[0], editor)
    dialog = Observation(app="mousepad", elements=(
        UIElement(ref="7", role=Role.TEXTBOX, label="Name", editable=True),
        UIElement(ref="8", role=Role.BUTTON, text="Save", clickable=True),
    ))
    assert sel.resolve(dialog).status is MatchStatus.NO_MATCH
    both = Observation(app="mousepad", elements=(*dialog.elements, editor.elements[0]))
    assert sel.resolve(both).element.ref == "1"
    labelled = Selector.for_element(dialog.elements[0], dialog)
    assert labelled.resolve(both).element.ref == "7"


@given(st.lists(st.sampled_from(["", "OK", "Name"]), min_size=1, max_size=5))
def test_an_unnamed_element_resolves_back_to_itself_among_named_ones(names):
    obs = Observation(app="w", elements=tuple(
        UIElement(ref=str(i), role=Role.TEXTBOX, label=n, editable=True) for i, n in enumerate(names)))
    for el in obs.elements:
        assert Selector.for_element(el, obs).resolve(obs).element.ref == el.ref


def test_each_screen_is_matched_on_its_own_text_however_many_screens_came_before():
    """The normalised names kept per screen are the screen's own: a screen made after the ones kept, even one
    that takes a freed screen's place in memory, is read afresh."""
    sel = Selector(role=Role.BUTTON, text="Submit")
    for i in range(40):  # more screens than are kept, each gone before the next is made
        text = "Submit" if i % 2 else "Cancel"
        obs = Observation(app="w", elements=(UIElement(ref="1", role=Role.BUTTON, text=f"  {text} ", clickable=True),))
        assert sel.resolve(obs).ok is bool(i % 2), i
        assert Selector(role=Role.BUTTON).resolve(obs).status is MatchStatus.NO_MATCH, "a named button is not unnamed"
        del obs


def test_binding_nothing_to_fill_is_the_same_selector_and_filling_is_a_new_one():
    from guimem.types import Action, ActionKind

    plain = Selector(role=Role.LINK, text="Ipsum")
    assert plain.bind({"x": "y"}) is plain
    filled = Selector(role=Role.LINK, text="{x}").bind({"x": "y"})
    assert filled.text == "y" and filled == Selector(role=Role.LINK, text="y")
    tap = Action(kind=ActionKind.TAP, selector=plain)
    assert tap.bind({"x": "y"}) is tap
    typed = Action(kind=ActionKind.TYPE, selector=plain, text="{x}").bind({"x": "y"})
    assert typed.text == "y" and typed.selector is plain


def test_same_screen_is_the_equality_of_app_location_and_every_field_of_every_element():
    """same_screen compares plain values (fast); it says what comparing the models says, for a change of any one
    field of any element (its bounds' too), of the app, the location or the element count."""
    from guimem.types import Bounds, Observation, Role, UIElement
    from guimem.types.ui import same_screen

    def screen(**changes: object) -> Observation:
        els = [UIElement(ref=str(i), role=Role.BUTTON, text=f"b{i}", label="l", resource_id="r", value=None,
                         bounds=Bounds(x=1, y=2, w=3, h=4), clickable=True, checked=None, container="c")
               for i in range(3)]
        which = changes.pop("element", None)
        if which is not None:
            els[1] = els[1].model_copy(update=changes)
            changes = {}
        return Observation(app=str(changes.pop("app", "a")), location=str(changes.pop("location", "/")),
                           elements=tuple(els[: int(changes.pop("count", 3))]))  # type: ignore[call-overload]

    base = screen()
    assert same_screen(base, screen()) and same_screen(base, base)
    other = {"ref": "9", "role": Role.LINK, "text": "x", "label": "y", "resource_id": "z", "value": "v",
             "bounds": Bounds(x=1, y=2, w=3, h=5), "clickable": False, "editable": True, "checked": False,
             "focused": True, "enabled": False, "container": "d"}
    assert set(other) == set(UIElement.model_fields)  # every field is checked
    for field, value in other.items():
        changed = screen(element=1, **{field: value})
        assert (base.elements == changed.elements) is False
        assert not same_screen(base, changed), field
    for field, value in {"app": "b", "location": "/x", "count": 2}.items():
        assert not same_screen(base, screen(**{field: value})), field


def test_screens_noted_with_the_same_source_text_are_the_same_without_comparing_elements(monkeypatch):
    """An env notes the text it parsed each screen from (`note_source`): the same text is the same screen (with the
    same app and location) at the cost of comparing two strings; another text, or a copy, is compared in full."""
    from guimem.types import Observation, Role, UIElement, ui

    def screen(text: str, app: str = "a") -> Observation:
        return Observation(app=app, location="/", elements=(UIElement(ref="1", role=Role.BUTTON, text=text),))

    a, b = screen("x"), screen("x")
    ui.note_source(a, '{"elements": ["x"]}')
    ui.note_source(b, '{"elements": ["x"]}')
    calls: list[Observation] = []
    monkeypatch.setattr(ui, "screen_key", lambda o: calls.append(o) or ui._plain)  # noted texts decide alone
    assert ui.same_screen(a, b) and not calls
    other_app = screen("x", app="b")
    ui.note_source(other_app, '{"elements": ["x"]}')
    assert not ui.same_screen(a, other_app)  # the app and location are not in the text
    monkeypatch.undo()
    c = screen("x")
    ui.note_source(c, '{"elements": ["x"], "done": true}')  # another text, the same elements: compared in full
    assert ui.same_screen(a, c)
    changed = a.model_copy(update={"elements": (UIElement(ref="1", role=Role.BUTTON, text="y"),)})
    assert not ui.same_screen(a, changed)  # a copy has no source of its own


def test_a_remembered_start_keeps_its_source_text_however_many_screens_were_noted_since():
    """`StartMemo` keeps a reset's source text with its screen and notes it again when it gives the guess: the
    first step's recall compares the reset's screen with the guess by text, even after many other screens."""
    from guimem.envs.base import StartMemo
    from guimem.types import Observation, Role, Task, UIElement, ui

    def screen(text: str) -> Observation:
        return Observation(app="a", location="/", elements=(UIElement(ref="1", role=Role.BUTTON, text=text),))

    task = Task(id="t", goal="g", app="a", seed=1)
    start = screen("start")
    ui.note_source(start, "start-text")
    memo = StartMemo()
    memo.remember(task, task, start)
    for i in range(50):  # later screens of the episode push it out of the noted texts
        ui.note_source(screen(str(i)), f"text {i}")
    assert ui.noted_source(start) is None
    guess = memo.expected(task)
    assert guess is not None and guess[1] is start and ui.noted_source(start) == "start-text"
    ui.note_source(screen("the reset's"), "the reset's text")  # the reset's own screen, noted next
    assert ui.noted_source(start) == "start-text"  # the guess was noted last: it is not the one forgotten
