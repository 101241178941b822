"""Android over ADB, without a device: recorded-format XML dumps and a fake transport."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from guimem.envs.android import AndroidEnv, input_text_arg, parse_hierarchy
from guimem.errors import EnvError
from guimem.testing import FakeAdbDevice, check_env
from guimem.types import Action, ActionErrorCode, ActionKind, Role, Selector, Task

DATA = Path(__file__).parent.parent / "data"
TASK = Task(id="shop-login", goal="Sign in as ann@example.com", app="com.example.shop",
            params={"email": "ann@example.com"}, seed=0)


def device() -> FakeAdbDevice:
    screens = {name: (DATA / f"android_{name}.xml").read_text() for name in ("login", "login_filled", "home")}
    return FakeAdbDevice(screens, start="login", transitions={
        ("login", r"input text ann@example\.com"): "login_filled",
        ("login_filled", r"input tap 540 943"): "home",
    }, activities={"login": "com.example.shop/.SignInActivity", "home": "com.example.shop/.HomeActivity"})


def test_uiautomator_xml_becomes_ui_elements():
    obs = parse_hierarchy((DATA / "android_login.xml").read_text())
    by_id = {e.resource_id: e for e in obs.elements if e.resource_id}
    assert obs.app == "com.example.shop"
    assert by_id["email"].role is Role.TEXTBOX and by_id["email"].label == "Email" and by_id["email"].editable
    assert by_id["remember"].role is Role.CHECKBOX and by_id["remember"].checked is False
    assert by_id["sign_in"].role is Role.BUTTON and by_id["sign_in"].bounds.center == (540, 943)
    up = Selector(role=Role.BUTTON, label="Navigate up").resolve(obs)
    assert up.ok


def test_malformed_dump_is_an_env_error():
    with pytest.raises(EnvError, match="not valid XML"):
        parse_hierarchy("<hierarchy><node")


def test_android_env_passes_the_env_contract():
    assert check_env(AndroidEnv(device(), settle_wait_s=0), TASK) == []


def test_actions_become_the_exact_shell_commands():
    dev = device()
    env = AndroidEnv(dev, settle_wait_s=0, success_check=lambda obs, task: any(
        e.resource_id == "greeting" for e in obs.elements))
    obs = env.reset(TASK)
    assert obs.location == ".SignInActivity"
    email = Selector(role=Role.TEXTBOX, resource_id="email").resolve(obs).element
    obs = env.step(Action(kind=ActionKind.TYPE, ref=email.ref, text="ann@example.com")).observation
    sign_in = Selector(role=Role.BUTTON, text="SIGN IN").resolve(obs).element
    env.step(Action(kind=ActionKind.TAP, ref=sign_in.ref))
    env.step(Action(kind=ActionKind.KEY, key="back"))
    env.step(Action(kind=ActionKind.SCROLL, direction="down"))
    assert dev.actions() == [
        "input keyevent KEYCODE_HOME", "am force-stop com.example.shop",
        "monkey -p com.example.shop -c android.intent.category.LAUNCHER 1",
        "input tap 540 463", "input keyevent KEYCODE_MOVE_END", "input text ann@example.com",
        "input tap 540 943", "input keyevent KEYCODE_BACK", "input swipe 540 1500 540 500 300",
    ]
    assert env.evaluate().success


def test_typing_replaces_existing_text_and_escapes_spaces():
    dev = device()
    dev.current = "login_filled"
    env = AndroidEnv(dev, settle_wait_s=0)
    obs = env._observe()
    email = Selector(role=Role.TEXTBOX, resource_id="email").resolve(obs).element
    env.step(Action(kind=ActionKind.TYPE, ref=email.ref, text="a b"))
    deletes = [c for c in dev.actions() if c == "input keyevent KEYCODE_DEL"]
    assert len(deletes) == len("ann@example.com")
    assert dev.actions()[-1] == "input text a%sb"
    assert input_text_arg("it's") == "'it'\"'\"'s'"


def test_bad_actions_are_data():
    env = AndroidEnv(device(), settle_wait_s=0)
    obs = env.reset(TASK)
    title = Selector(role=Role.TEXT, text="Sign in").resolve(obs).element
    assert env.step(Action(kind=ActionKind.TYPE, ref=title.ref, text="x")).error.code is ActionErrorCode.NOT_EDITABLE
    assert env.step(Action(kind=ActionKind.KEY, key="warp")).error.code is ActionErrorCode.INVALID_ACTION
    assert env.step(Action(kind=ActionKind.TAP, ref="999")).error.code is ActionErrorCode.NO_SUCH_ELEMENT


def test_without_a_success_check_the_outcome_says_so():
    env = AndroidEnv(device(), settle_wait_s=0)
    env.reset(TASK)
    assert "no success check" in env.evaluate().reason


def _device_attached() -> bool:
    if shutil.which("adb") is None:
        return False
    out = subprocess.run(["adb", "devices"], capture_output=True, text=True, timeout=10).stdout
    return any(line.endswith("\tdevice") for line in out.splitlines())


@pytest.mark.device
@pytest.mark.skipif(not _device_attached(), reason="no Android device attached (adb devices lists none)")
def test_real_device_observation():
    from guimem.envs.android import AdbTransport

    env = AndroidEnv(AdbTransport())
    obs = env.reset(Task(id="home", goal="look at the home screen", app="", seed=0))
    assert obs.elements
