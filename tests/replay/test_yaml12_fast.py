"""The YAML 1.2 reader's fast path (libyaml's C parser under the same composer, for the texts
``yaml12._fast_eligible`` admits) reads exactly what the strict path (PyYAML's pure-Python
reader) reads, and refuses nothing the strict path reads: whenever it answers, the strict path
gives the same value; whenever the strict path refuses, the fast path declines and the strict
path words the refusal.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.formats import yaml12
from core.formats.yaml12 import YAML12Error, load
from tests.replay.test_format_ahd import DIFFERENCES, VECTORS

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def strict(text: str) -> tuple[str, Any]:
    try:
        return "ok", repr(yaml12._load_strict(text))
    except YAML12Error as exc:
        return "refused", str(exc)


def assert_agrees(text: str) -> bool:
    """The fast path, when the text is eligible and it answers, gives the strict value; and
    ``load`` gives exactly the strict outcome. True when the fast path answered."""
    expected = strict(text)
    answered = False
    if yaml12._fast_eligible(text):
        fast = yaml12._load_fast(text)
        if fast is not yaml12._NOT_FAST:
            answered = True
            assert expected == ("ok", repr(fast)), text
    try:
        got: tuple[str, Any] = ("ok", repr(load(text)))
    except YAML12Error as exc:
        got = ("refused", str(exc))
    assert got == expected, text
    return answered


TOKEN = (
    "# token 1\nname: token-1\nversion: 3\npalette:\n  c0: '#a1b2c3'\n  c1: '#000000'\n"
    "type:\n  scale: [12, 14, 16, 20, 24, 32]\n  family: naïve\nnotes: 'café Straße alpha beta'\n"
)


def test_a_plain_token_takes_the_fast_path_with_the_strict_value():
    assert yaml12._fast_eligible(TOKEN)
    assert assert_agrees(TOKEN)
    assert load(TOKEN) == {
        "name": "token-1",
        "version": 3,
        "palette": {"c0": "#a1b2c3", "c1": "#000000"},
        "type": {"scale": [12, 14, 16, 20, 24, 32], "family": "naïve"},
        "notes": "café Straße alpha beta",
    }


@pytest.mark.parametrize(
    "text",
    [
        "a:\tb\n",  # tab: patched in PyYAML's scanner
        "a: x\r\n",
        "a: x\u2028y\n",
        "\ufeffa: 1\n",
        'a: "\\/"\n',
        "a: |\n  x\n",
        "a: >\n  x\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: !!str 1\n",
        "a: &x 1\nb: *x\n",
        "? a\n: b\n",
        "--- 1\n",
        "a: 1\n...\n",
        "a: `x`\n",
        "a: @x\n",
        "a: \x07\n",
        "a: \U0001f600\n",
        "k" * 1000 + ": v\n",
    ],
)
def test_what_the_fast_path_declines(text):
    assert not yaml12._fast_eligible(text)
    assert_agrees(text)


@pytest.mark.parametrize("text", [text for text, _ in VECTORS] + [t for t, _, _ in DIFFERENCES])
def test_the_yaml_vectors_agree(text):
    assert_agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",
        "1: a\n1.0: b\n",
        "null: a\n~: b\n",
        "a: [1, 2\n",
        "a: 'x\n",
        "a:\n  - 1\n b: 2\n",
        "- a\nb: c\n",
        "a: b: c\n",
        "[a, b]]\n",
        "{a: 1, a: 2}\n",
        "a:\n- 1\n- 2\n",
        "a: 'it''s'\nb: \"q\"\n",
        "a: x\n  y\n\n  z\n",
        "a: 'x\n\n  y'\n",
        "a # b\n",
        "a: b #c\nd: e#f\n",
        "- - - x\n",
        "{a: [b, {c: d}], e: }\n",
        "[a: 1, b]\n",
        "a: -\n",
        "- \n-\n",
        ":\n",
        "a: ,\n",
        "'a': {'b': [1, '2']}\n",
    ],
)
def test_hand_picked_texts_agree(text):
    assert_agrees(text)


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=15,
)


@FAST
@given(JSONISH, st.sampled_from([None, True, False]), st.booleans())
def test_documents_written_by_pyyaml_agree(value, flow, unicode):
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=unicode, sort_keys=False)
    assert_agrees(text)


PIECES = [
    "a",
    "b",
    "key",
    "x y",
    "1",
    "017",
    "0o17",
    "0x1F",
    "1e3",
    ".5",
    "-.inf",
    ".nan",
    "1_000",
    "true",
    "yes",
    "null",
    "~",
    "2001-12-14",
    "naïve",
    "'q'",
    "'it''s'",
    '"d"',
    "'",
    '"',
    ":",
    ": ",
    "- ",
    "-",
    ",",
    ", ",
    "[",
    "]",
    "{",
    "}",
    "#",
    " #c",
    "=",
    "<",
    "$",
    "^",
    "~x",
    " ",
    "  ",
    "\n",
    "\n  ",
    "\n- ",
    "\n\n",
]


@FAST
@given(st.lists(st.sampled_from(PIECES), max_size=24))
def test_random_texts_from_yaml_pieces_agree(pieces):
    assert_agrees("".join(pieces))


ALPHABET = "ab01 :-,[]{}#'\"\n.=é"


@FAST
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_random_texts_from_the_eligible_alphabet_agree(text):
    assert_agrees(text)
