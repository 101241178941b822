from __future__ import annotations

from guimem.types import Observation, Role, UIElement, screen_signature, structure_hash
from tests.conftest import login_screen


def test_same_screen_with_other_values_gets_the_same_signature():
    a = screen_signature(login_screen(username_value="alice", distractor="Welcome 12"), masks=["alice"])
    b = screen_signature(login_screen(username_value="bob", distractor="Lorem ipsum 97"), masks=["bob"])
    assert a == b


def test_numbers_and_task_values_are_masked():
    obs = Observation(app="w", location="/inbox/42", elements=(
        UIElement(ref="1", role=Role.LINK, text="Email from Kasey", clickable=True),
        UIElement(ref="2", role=Role.BUTTON, text="Page 3", clickable=True),
    ))
    sig = screen_signature(obs, masks=["Kasey"])
    assert "42" not in sig and "Kasey" not in sig
    assert "link Email from {v}" in sig and "button Page #" in sig


def test_different_screens_get_different_signatures_and_hashes():
    login = login_screen()
    inbox = Observation(app="miniwob", location="#main #main-header", elements=(
        UIElement(ref="1", role=Role.LINK, text="Reply", clickable=True),
        UIElement(ref="2", role=Role.BUTTON, text="Forward", clickable=True),
    ))
    assert screen_signature(login) != screen_signature(inbox)
    assert structure_hash(login) != structure_hash(inbox)
    assert structure_hash(login) == structure_hash(login_screen(username_value="zed"))


def test_masking_replaces_whole_words_only():
    from guimem.types import mask_text

    assert mask_text("username field on login-user", ["US"]) == "username field on login-user"
    assert mask_text("Email from US office", ["US"]) == "Email from {v} office"
