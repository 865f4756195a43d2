"""The JSON viewer: a value as nested <details>, escaped, in the value's own order, the first
levels open, and no tree at all past its size bound."""

from __future__ import annotations

import html
import re

import pytest

from console.jsonview import json_tree

pytestmark = pytest.mark.django_db


def test_the_exact_markup_of_a_small_value():
    assert json_tree({"b": [1, "x"], "a": {}}) == (
        '<div class="json-tree">'
        '<details open><summary>{<span class="jt-size"> 2 keys </span></summary><ul>'
        '<li><details open><summary><span class="jt-key">"b"</span>: ['
        '<span class="jt-size"> 2 items </span></summary><ul>'
        '<li><span class="jt-index">0</span>: <span class="jt-num">1</span>,</li>'
        '<li><span class="jt-index">1</span>: <span class="jt-str">"x"</span></li>'
        "</ul>],</details></li>"
        '<li><span class="jt-key">"a"</span>: {}</li>'
        "</ul>}</details></div>"
    )


def test_keys_and_strings_are_escaped_and_scalars_spelled_as_json():
    tree = json_tree({"<k>": "</summary><script>alert(1)</script>", "n": None, "t": True})
    assert "<script>" not in tree
    assert '<span class="jt-key">"&lt;k&gt;"</span>' in tree
    assert html.escape('"</summary><script>alert(1)</script>"', quote=False) in tree
    assert '<span class="jt-null">null</span>' in tree
    assert '<span class="jt-bool">true</span>' in tree


def test_levels_past_the_open_depth_are_folded():
    tree = json_tree({"a": {"b": {"c": {"d": 1}}}}, open_depth=2)
    assert [m.group(1) for m in re.finditer(r"<details( open)?>", tree)] == [
        " open",
        " open",
        None,
        None,
    ]


def test_a_value_past_the_bound_is_not_drawn():
    assert json_tree(list(range(10)), max_nodes=10) == ""
    assert json_tree(list(range(9)), max_nodes=10) != ""


def test_the_event_page_shows_the_tree_and_keeps_the_plain_json(as_persona, ingest):
    trace = ingest("ok")
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/events/0/").content.decode()
    assert '<div class="json-tree"><details open><summary>{' in body
    assert '<details class="plain-json"><summary>Plain JSON</summary><pre class="payload">' in body


def test_the_run_report_can_be_browsed(as_persona, replayed):
    run = replayed("diverged")
    page = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
    assert f'href="/runs/{run.id}/report/" id="browse-report">Browse the report</a>' in page
    body = as_persona("vera").get(f"/runs/{run.id}/report/").content.decode()
    error_code = (
        '<span class="jt-key">"error_code"</span>: <span class="jt-str">"REPLAY_DIVERGENCE"'
    )
    assert error_code in body
