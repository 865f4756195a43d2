"""A JSON value as a tree a person can fold: nested ``<details>``/``<summary>`` elements.

No script and no inline style, so it works under the strict CSP and with JavaScript off; a
``<summary>`` takes the keyboard focus and opens or closes with Enter or Space, as every
browser does natively. The first levels are open, deeper ones folded. A value with more than
``MAX_NODES`` nodes is not drawn as a tree (the page keeps its plain text): a tree of a
100,000-event report would weigh more than the page it sits on.

Every key and string is HTML-escaped here, as text content (never put in an attribute): the
only place this module writes markup from data. Keys keep their order (a report's order is
meaningful); strings are JSON-spelled.
"""

from __future__ import annotations

import html
import json
from typing import Any

MAX_NODES = 5000
OPEN_DEPTH = 2


def _scalar(value: Any) -> str:
    text = html.escape(json.dumps(value, ensure_ascii=False), quote=False)
    if isinstance(value, str):
        kind = "str"
    elif value is None:
        kind = "null"
    elif isinstance(value, bool):
        kind = "bool"
    else:
        kind = "num"
    return f'<span class="jt-{kind}">{text}</span>'


def _count(value: Any, limit: int) -> int:
    """Nodes in ``value``, counting stops past ``limit``."""
    seen = 0
    stack = [value]
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return seen
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def json_tree(value: Any, *, open_depth: int = OPEN_DEPTH, max_nodes: int = MAX_NODES) -> str:
    """The tree's HTML, or ``""`` when ``value`` has more than ``max_nodes`` nodes."""
    if _count(value, max_nodes) > max_nodes:
        return ""
    out: list[str] = ['<div class="json-tree">']
    _node(out, None, value, 0, open_depth, last=True)
    out.append("</div>")
    return "".join(out)


def _label(key: str | int | None) -> str:
    if key is None:
        return ""
    if isinstance(key, int):
        return f'<span class="jt-index">{key}</span>: '
    spelled = html.escape(json.dumps(key, ensure_ascii=False), quote=False)
    return f'<span class="jt-key">{spelled}</span>: '


def _node(
    out: list[str], key: str | int | None, value: Any, depth: int, open_depth: int, *, last: bool
) -> None:
    comma = "" if last else ","
    if isinstance(value, dict | list) and value:
        is_dict = isinstance(value, dict)
        opening, closing = ("{", "}") if is_dict else ("[", "]")
        size = len(value)
        what = f"{size} key{'s' if size != 1 else ''}" if is_dict else f"{size} item"
        what += "" if is_dict or size == 1 else "s"
        attr = " open" if depth < open_depth else ""
        out.append(
            f"<details{attr}><summary>{_label(key)}{opening}"
            f'<span class="jt-size"> {what} </span></summary><ul>'
        )
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        for i, (k, v) in enumerate(items):
            out.append("<li>")
            _node(out, k, v, depth + 1, open_depth, last=i == size - 1)
            out.append("</li>")
        out.append(f"</ul>{closing}{comma}</details>")
        return
    if isinstance(value, dict | list):
        out.append(f"{_label(key)}{'{}' if isinstance(value, dict) else '[]'}{comma}")
        return
    out.append(f"{_label(key)}{_scalar(value)}{comma}")
