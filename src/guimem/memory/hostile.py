"""Page text that addresses the agent: the screen memory puts every page-derived span through.

A GUI agent reads pages written by strangers, and memory replays what it saw to later episodes — of
other tasks too. Text planted to steer an agent ("ignore previous instructions", a fake ``system:``
turn, "note to the AI: …", a password request, an off-site link, a label far longer than a control's)
must never come back as memory's own advice. This module decides, by structure and not by a list of
known attacks, whether a span of page text *addresses the agent*; `guimem.memory.kit` keeps items
carrying such text out of injections, the admission lifecycle never admits them by trials, and the
round boundary does not learn from an episode that acted on it (docs/security.md).

Every check here is bounded: spans are cut to `MAX_SCREENED` characters before any pattern runs.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from guimem.types import Action, Behaviour, Observation, Trajectory, UIElement

MAX_SCREENED = 2_000
"""Characters of one span that are screened (the rest cannot make it less hostile)."""
CONTROL_CHARS = 60
CONTROL_WORDS = 10
MIN_NAME = 3
"""A control name shorter than this (normalised) is too common a string to say which control text names."""
"""A control's label longer than this is not a label: it is text written to be read."""

_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff]")
_SEPARATOR = re.compile(r"[\s.\-_*·|]{1,3}")
"""What spaces letters apart (`_SPACED`)."""
_SPACED = re.compile(r"(?<![^\W\d_])(?:[^\W\d_]" + _SEPARATOR.pattern + r"){3,}[^\W\d_](?![^\W\d_])")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")

_ROLE_MARKER = re.compile(
    r"<\|?\s*/?\s*(?:im_start|im_end|system|assistant|user|endoftext|eot_id|start_header_id)\s*\|?>"
    r"|\[/?\s*(?:inst|sys|system)\s*\]|<<\s*/?\s*sys\s*>>|#{2,}\s*(?:instruction|system|response|assistant)"
    r"|</?\s*(?:system|assistant|instructions?|prompt|tool_call|function_call)\s*>"
    r"|(?:^|[\s\"'(\[{>|])(?:system|assistant|developer|admin(?:istrator)?|operator|human|ai|a\.i\.|bot|llm|gpt"
    r"|sysadmin)\s*(?:message|prompt|note|override|instruction)?\s*[:>\]]\s*\S",
    re.IGNORECASE)
_OVERRIDE_VERB = re.compile(
    r"\b(?:ignor\w*|disregard\w*|forget\w*|overrid\w*|overwrit\w*|bypass\w*|circumvent\w*|discard\w*"
    r"|supersed\w*|neglect\w*|vergiss\w*|vergessen|ignorier\w*|olvid\w*"
    r"|oubli\w*|esque[cç]\w*|dimentic\w*|забуд\w*|игнор\w*|не обращай)|忽略|无视|無視|忘记|忘れ",
    re.IGNORECASE)
_OVERRIDE_OBJECT = re.compile(
    r"\b(?:instruction\w*|rules?|directions?|directives?|guidelines?|prompts?|tasks?|goals?|orders?|objectives?"
    r"|previous\w*|prior|above|earlier|preceding|original|everything|all|constraints?|polic(?:y|ies)|context"
    r"|instrucc\w*|anweisung\w*|vorherig\w*|consigne\w*|précédent\w*|istruzion\w*|instru[çc]\w*|regeln?"
    r"|инструкц\w*|правил\w*|предыдущ\w*)|指令|指示|规则|之前|以上",
    re.IGNORECASE)
_NEW_ORDERS = re.compile(
    r"\b(?:new|updated|revised|additional|urgent|priority|override|system)\s+"
    r"(?:instructions?|orders|directives?|prompt)\b"
    r"|\b(?:real|actual|true|secret|hidden)\s+(?:instructions?|orders|tasks?|goals?|objectives?|directives?"
    r"|mission|assignment|prompt)\b"
    r"|\byour\s+(?:real|actual|true|new|only|primary|next|main)\s+(?:task|goal|job|objective|mission|purpose)\b"
    r"|\b(?:from now on|you are now|you must now|act as|pretend (?:to be|you)|role-?play as|developer mode"
    r"|jailbreak|do anything now|no longer (?:follow|bound)|stop following|do not follow|don'?t follow"
    r"|instead of (?:the|your) (?:task|goal|instructions?))\b"
    r"|\b(?:neue|nouvelles?|nuevas?|nuove|novas?)\s+(?:anweisung\w*|instructions?|instrucc\w*|istruzion\w*"
    r"|instru[çc]\w*)|новые инструкции|新的指令|新指令",
    re.IGNORECASE)
_MACHINE = re.compile(
    r"\b(?:a\.?i\.?|assistants?|agents?|bots?|chat-?bots?|llms?|gpts?|chat-?gpt|claude|gemini|copilot|"
    r"language models?|(?:the |this )?model|automat(?:ed|ion) (?:system|tool|agent|browser)|robots?|crawlers?|"
    r"auto-?pilot|scrapers?|web ?agents?|browsing agents?|ki|ia|ии|нейросеть|ассистент\w*|ботам?)\b"
    r"|助手|机器人|智能体|人工智能|アシスタント|エージェント",
    re.IGNORECASE)
_TO_READER = re.compile(
    r"\b(?:you|your|yours|yourself|u|please|pls|must|should|shall|need to|have to|are required|is required"
    r"|always|never|now|immediately|instead|important|attention|note|notice|warning|reminder|listen|urgent"
    r"|hey|hello|dear|make sure|be sure|do not|don'?t|reading this|read this|this page|if you are|when you see"
    r"|click|press|tap|type|enter|select|choose|open|visit|navigate|go to|submit|download|install|run|execute"
    r"|send|follow|proceed|continue|confirm"
    r"|vous|votre|du|dein\w*|sie|usted|tu|tú|debes|devez|musst|muss|ты|вы|ваш\w*|нужно|должен)\b"
    r"|请|必须|你|您",
    re.IGNORECASE)
_CREDENTIAL = re.compile(
    r"\b(?:pass ?words?|pass ?codes?|pass ?phrases?|pins?|otp|one[- ]time (?:code|password)|2fa|mfa"
    r"|verification code|security code|auth(?:entication)? code|credit ?cards?|card numbers?|cvv|cvc|ssn"
    r"|social security|api[ -]?keys?|secret keys?|access tokens?|private keys?|seed phrase|recovery phrase"
    r"|bank account|routing number|login details|credentials?|mot de passe|passwort|kennwort|contraseña"
    r"|senha|пароль\w*)\b|密码|口令",
    re.IGNORECASE)
_ASK = re.compile(
    r"\b(?:enter|type|provide|send|share|give|confirm|verify|re-?enter|submit|paste|input|tell|reveal"
    r"|disclose|write|fill|email|post|upload|forward|saisi\w*|entrez|eingeben|geben|introduce|ingrese"
    r"|введите|отправьте)\b|输入|提供|发送",
    re.IGNORECASE)
_NOW = re.compile(r"\b(?:first|before|now|immediately|urgent\w*|asap|right away|required|mandatory|must|also"
                  r"|again|to (?:avoid|prevent|keep)|or (?:else|your)|expire\w*|suspend\w*|lock\w*)\b",
                  re.IGNORECASE)
_URL = re.compile(
    r"(?:\b[a-z][a-z0-9+.-]{1,15}://|\bwww\.|\b(?:javascript|data|vbscript):)\S*"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|ru|cn|xyz|info|biz|co|me|app|dev|top|site|online|link|click"
    r"|ly|gg|tk|ml|ga|cf|zip|mov|sh|to|cc|su|pw|ws|us|uk|de|fr)\b(?:[/:?#]\S*)?"
    r"|\b[\w.+-]+@[\w-]+\.[\w.-]+",
    re.IGNORECASE)
_MARKUP = re.compile(r"<\s*/?\s*(?:script|iframe|img|svg|object|embed|style|a|form|input|meta|link)\b|"
                     r"\bon[a-z]{3,}\s*=|\{\{|\$\{|&#x?[0-9a-f]+;", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """Why a span is hostile: the reason in words and the span (bounded) it was found in."""

    reason: str
    span: str
    controls: tuple[str, ...] = ()
    """The controls (normalised names) the span directs the reader to, for `directed` text; empty otherwise."""

    def __str__(self) -> str:
        return f"{self.reason}: {self.span[:80]!r}"


def normalise(text: str) -> str:
    """The forms hostile text hides behind, undone: compatibility forms (full-width, ligatures),
    invisible characters, letters spaced or dotted apart, digits for letters; case-folded."""
    return _plain(text).casefold()


def _plain(text: str) -> str:
    """`normalise` but for the case."""
    out = unicodedata.normalize("NFKC", text[:MAX_SCREENED])
    out = _INVISIBLE.sub("", out)
    out = _SPACED.sub(_unspace, out)
    return " ".join(out.split())


def _unspace(match: re.Match[str]) -> str:
    """Letters spaced apart joined again: the separator between most of the letters is the one inside
    words, and any other (a wider gap, another mark) is a word boundary ("g.o t.o" is "go to", and
    "i g n o r e   a l l" is "ignore all"), so the words stay words for the patterns that look for them."""
    run = match.group(0)
    seps = _SEPARATOR.findall(run)
    inside = Counter(seps).most_common(1)[0][0]
    return _SEPARATOR.sub(lambda m: "" if m.group(0) == inside else " ", run)


_JOINED = re.compile(r"(?<=[^\W_])[_\-./:+]+(?=[^\W_])|(?<=[a-z])(?=[A-Z])")


def _unjoined(text: str) -> str:
    """Words an identifier joins, apart again: ``ignore_all_previous``, ``ignore-all``, ``IgnorePrevious``
    (a one-token page name or location hides a sentence that way; the patterns look for words)."""
    return _JOINED.sub(" ", text)


def _deleet(text: str) -> str:
    return " ".join(w.translate(_LEET) if any(c.isalpha() for c in w) else w for w in text.split())


def _urls(text: str, site: str) -> list[str]:
    allowed = normalise(site)
    return [u for u in (m.group(0) for m in _URL.finditer(text)) if u.rstrip("/.,") not in allowed]


def screen(text: str, *, control: bool = False, site: str = "", summary: bool = False) -> Finding | None:
    """Whether ``text`` (page text) addresses the agent, and why; None when it reads as page content.

    Args:
        text: One span of page text (a label, a value, an option, a screen line, a summary).
        control: The span names a control the agent acts on (a selector's label or text): longer than
            a control's label is hostile by itself.
        site: Text the task's own instruction gives (its goal): a URL or address it names is the
            task's, not an attacker's.
        summary: The span is a summary of what was done (a model's or an export's words), not page text:
            naming a password field is what a login procedure says, so credentials are not screened.
    """
    return _screen(text[:MAX_SCREENED], control, site[:MAX_SCREENED], summary)  # what lies beyond is never read


@lru_cache(maxsize=8192)
def _screen(text: str, control: bool, site: str, summary: bool) -> Finding | None:
    """`screen` of one bounded span. Recall screens the same controls' names for every item that acts on them, on
    every screen, so the answers are kept (a `Finding` is frozen)."""
    if not text.strip():
        return None
    span = " ".join(text.split())
    for form in dict.fromkeys((normalise(text), _deleet(normalise(text)), normalise(_unjoined(text)))):
        found = _screen_form(form, span, site, control, summary)
        if found is not None:
            return found
    words = len(_WORD.findall(span))
    if control and (len(span) > CONTROL_CHARS or words > CONTROL_WORDS):
        return Finding(f"far longer than a control label ({len(span)} characters, {words} words)", span)
    return None


def _screen_form(form: str, span: str, site: str, control: bool, summary: bool) -> Finding | None:
    if _ROLE_MARKER.search(form):
        return Finding("a role marker (text posing as a system, assistant or user turn)", span)
    if _OVERRIDE_VERB.search(form) and _OVERRIDE_OBJECT.search(form):
        return Finding("tells the agent to set its instructions aside", span)
    if _NEW_ORDERS.search(form):
        return Finding("gives the agent new orders", span)
    if _MACHINE.search(form) and _TO_READER.search(form):
        return Finding("addresses the agent (an AI, assistant, bot or model)", span)
    if not summary and _CREDENTIAL.search(form) and _ASK.search(form) and (_NOW.search(form) or len(form.split()) >= 8):
        return Finding("asks for credentials", span)
    if _MARKUP.search(form):
        return Finding("markup or code in page text", span)
    off_site = _urls(form, site)
    if off_site and (control or _TO_READER.search(_URL.sub(" ", form))):
        # a shown address (a search result's) is page content; one on a control, or one the text sends the
        # reader to, is an attacker's way off the task's site
        return Finding(f"a link or address not on the task's site ({off_site[0][:60]})", span)
    return None


def page_spans(behaviour: Behaviour) -> tuple[str, ...]:
    """The page text an item's behaviour carries: its selectors' labels and texts (literal typed text
    is the agent's own, and ``{param}`` templates are the task's)."""
    out: list[str] = []
    for action in behaviour.actions:
        sel = action.selector
        if sel is not None:
            out += [s for s in (sel.label, sel.text) if s and "{" not in s]
    return tuple(dict.fromkeys(out))


def screen_spans(spans: Iterable[str], *, control: bool = False, site: str = "") -> Finding | None:
    """The first hostile span among ``spans``."""
    for s in spans:
        found = screen(s, control=control, site=site)
        if found is not None:
            return found
    return None


def screen_item(text: str, behaviour: Behaviour, *, page: Iterable[str] = (), written: bool = False,
                site: str = "") -> Finding | None:
    """Whether an item carries hostile page text: its behaviour's controls, the ``page`` spans its text
    quotes (screen lines, effects), and — when ``written`` (a model's or an import's words, not guimem's
    own template) — its whole text."""
    return (screen_spans(page_spans(behaviour), control=True, site=site)
            or screen_spans(page, site=site)
            or (screen(text, site=site, summary=True) if written else None))


def _bounds_known(obs: Observation) -> bool:
    return any(el.bounds.w > 0 and el.bounds.h > 0 for el in obs.elements)


def _unseen(el: UIElement) -> bool:
    """Hidden, 1 px, zero-size at a place, or off-screen; an element whose box is all zero is one whose env
    did not report it (a recorded observation may give some boxes and not others), not a hidden one."""
    b = el.bounds
    if b.x == b.y == b.w == b.h == 0:
        return False
    return b.w <= 1 or b.h <= 1 or b.x + b.w <= 0 or b.y + b.h <= 0


def _target(action: Action, obs: Observation) -> UIElement | None:
    if action.ref:
        return obs.element(action.ref)
    if action.selector is not None:
        found = action.selector.resolve(obs)
        return found.element
    return None


@lru_cache(maxsize=4096)
def _screened(text: str, site: str) -> Finding | None:
    return screen(text, site=site)


def _points_at(finding: Finding, name: str) -> bool:
    """Does ``finding`` point at the control named ``name`` (normalised)? Text that directs the reader names
    its controls (`Finding.controls`); hostile text points at any control whose name it carries."""
    if len(name) < MIN_NAME:
        return False
    return name in finding.controls if finding.controls else name in normalise(finding.span)


def acted_on_hostile(trajectory: Trajectory) -> Finding | None:
    """Whether an episode must not be learned from, and why: a step acted on an element that is itself
    hostile, hidden, zero-size or off-screen, or that hostile text on one of the episode's screens names
    (a benign-looking control an instruction points at), or that page text there directs the reader to
    while the goal does not name it (`directed`); or, failing those, any of its screens carries
    text that addresses the agent at all — such text may point at a control without naming it (by its
    address, its colour, its place), so nothing the episode did is trusted (it fails closed)."""
    site = trajectory.task.goal
    screens = [s.observation for s in trajectory.steps]
    texts = dict.fromkeys(t for obs in screens for el in obs.elements for t in (el.label, el.text) if t)
    hostile = [f for f in (_screened(t[:MAX_SCREENED], site) for t in texts) if f is not None]
    for step in trajectory.steps:
        actions = step.performed or (step.action,)
        obs = step.observation
        pointing = hostile + directed(obs, site)
        for action in actions:
            if not action.is_ui:
                continue
            el = _target(action, obs)
            if el is None:
                continue
            found = screen_spans((el.label, el.text), control=True, site=site)
            if found is not None:
                return found
            if _bounds_known(obs) and _unseen(el):
                return Finding("acted on a hidden, zero-size or off-screen element", el.name)
            name = normalise(el.name)
            for f in pointing:
                if _points_at(f, name):
                    return Finding(f"acted on a control page text points at ({f.reason})", f.span)
    if hostile:
        return Finding(f"its pages carry text that addresses the agent ({hostile[0].reason})", hostile[0].span)
    return None


def hostile_on_screen(observation: Observation, site: str = "") -> list[Finding]:
    """The hostile texts of one screen (each distinct text screened once per process, then cached)."""
    texts = dict.fromkeys(t[:MAX_SCREENED] for el in observation.elements for t in (el.label, el.text) if t)
    return [f for f in (_screened(t, site) for t in texts) if f is not None]


_DIRECTS = re.compile(
    r"\b(?:you|your|yours|yourself|please|kindly|click|press|tap|type|enter|select|choose|use|fill|repeat|confirm"
    r"|open|submit|check|visit|go to|follow|proceed|continue|must|need to|should|make sure|be sure"
    r"|bitte|veuillez|vous|votre|por favor|usted|per favore|пожалуйста|вы|ваш\w*)\b|请|您",
    re.IGNORECASE)
"""What makes a page text speak to its reader, for `directed` (narrower than the screen's: no bare pronouns of
other languages that are also articles, no "u")."""
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+)$")


def _name_pattern(name: str) -> re.Pattern[str]:
    """How text names the control ``name`` (`_plain`): a name of several words in any case; a name of one
    word as written, not as a sentence's first word (an ordinary "save" or "Email" in a sentence is a word,
    not the control)."""
    if " " in name:
        return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
    return re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)")


def _names(text: str, name: str, pattern: re.Pattern[str]) -> bool:
    """Does ``text`` name the control ``name`` (both `_plain`), by its `_name_pattern`?"""
    if " " in name:
        return pattern.search(text) is not None
    return any(not _SENTENCE_START.search(text[:m.start()]) for m in pattern.finditer(text))


def directed(observation: Observation, goal: str = "") -> list[Finding]:
    """Page text that tells its reader to use a control the task's goal does not name.

    Such a text is not a control (nor a control's own label or text), speaks to the reader, and names a
    control of the screen (`_names`). The page, not the task, chose that control: an instruction planted
    beside a benign-looking control ("Confirm password", a lookalike of the page's own field) reads like this
    whatever its phrasing, and so does an ordinary page's "By clicking Sign up, you agree". Memory neither
    learns from an episode that acted on such a control nor replays an action on it, unless the goal names
    the control too (then the task chose it as well); the finding lists the controls (`Finding.controls`),
    and only those are held back. Not hostile by itself: an episode whose pages carry such text but that never
    used those controls is learned from as usual.
    """
    names = tuple(sorted({_plain(n) for el in observation.elements if el.clickable or el.editable
                          for n in (el.label, el.text) if n}))
    texts = tuple(dict.fromkeys(el.text for el in observation.elements
                                if el.text and not (el.clickable or el.editable)))
    return list(_directed(texts, names, goal))


@lru_cache(maxsize=1024)
def _directed(texts: tuple[str, ...], names: tuple[str, ...], goal: str) -> tuple[Finding, ...]:
    wanted = normalise(goal)
    candidates = [(n, n.casefold(), norm, _name_pattern(n)) for n in names if len(norm := normalise(n)) >= MIN_NAME
                  and not re.search(r"(?<!\w)" + re.escape(norm) + r"(?!\w)", wanted)]
    if not candidates:
        return ()
    out: list[Finding] = []
    for raw in texts:
        text = _plain(raw)
        folded = text.casefold()
        named = tuple(norm for n, fold, norm, pattern in candidates
                      if fold in folded and n != text and _names(text, n, pattern))
        if named and _DIRECTS.search(text):
            out.append(Finding(f"page text directs the reader to a control the goal does not name ({named[0][:40]})",
                               " ".join(raw[:MAX_SCREENED].split()), controls=named))
    return tuple(out)


def steered(behaviour: Behaviour, observation: Observation, params: dict[str, str], site: str = "",
            hostile: list[Finding] | None = None) -> Finding | None:
    """Whether replaying ``behaviour`` on this screen would do what hostile page text here asks: one of its
    controls is named by such text (a lookalike control an instruction points at), or resolves to a
    hostile, hidden or off-screen element. Memory then stays silent about it on this screen."""
    hostile = hostile_on_screen(observation, site) if hostile is None else hostile
    known = _bounds_known(observation)
    for action in behaviour.actions:
        sel = action.selector
        if sel is None:
            continue
        bound = sel.bind(params)
        for name in (bound.label, bound.text):
            n = normalise(name)
            for f in hostile:
                if "{" not in n and _points_at(f, n):
                    return Finding(f"points at a control page text on this screen names ({f.reason})", f.span)
        for el in bound.matches(observation, {}):
            found = screen_spans((el.label, el.text), control=True, site=site)
            if found is not None:
                return found
            if known and _unseen(el):
                return Finding("points at a hidden, zero-size or off-screen element", el.name)
    return None


QUOTE_OPEN, QUOTE_CLOSE = "«", "»"
QUOTE_LIMIT = 60
"""Characters of one quoted page span shown to the agent."""


def quote(span: str, limit: int = QUOTE_LIMIT) -> str:
    """``span`` as quoted page data: its quote marks cannot be closed from inside, line breaks and
    invisible characters are gone, and it is cut at ``limit`` characters."""
    clean = _INVISIBLE.sub("", " ".join(span.split()))
    clean = clean.replace(QUOTE_OPEN, "‹").replace(QUOTE_CLOSE, "›")
    if len(clean) > limit:
        clean = clean[: limit - 1].rstrip() + "…"
    return f"{QUOTE_OPEN}{clean}{QUOTE_CLOSE}"


def quote_spans(text: str, spans: Iterable[str], limit: int = QUOTE_LIMIT) -> str:
    """``text`` with every span of page text it carries (as actions describe a control, ``"name"``, or
    a typed ``'value'``, or verbatim when it is several words) replaced by its `quote`, in one pass: the
    longest form first, and nothing already quoted is quoted again."""
    forms: dict[str, str] = {}
    for span in (s for s in spans if s.strip()):
        q = quote(span, limit)
        # verbatim only when it has words apart (a screen line): a one-word label also names code and params
        for form in (f'"*{span}*"', f'"{span}"', repr(span), *((span,) if " " in span.strip() else ())):
            forms.setdefault(form, q)
    if not forms:
        return text
    pattern = re.compile("|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
    return pattern.sub(lambda m: forms[m.group(0)], text)
