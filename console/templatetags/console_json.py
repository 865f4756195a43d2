"""Template filters that show a value as JSON, never as a Python ``repr``.

``{{ value|json_tree }}`` draws the foldable tree of console.jsonview (plain JSON past its
size bound); ``{{ value|as_json }}`` is indented JSON text, in the keys' own order.
"""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from console.jsonview import json_tree as _tree

register = template.Library()


def _text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def as_json(value: Any) -> str:
    return _text(value)


@register.filter
def json_tree(value: Any) -> SafeString:
    tree = _tree(value)
    if tree:
        return mark_safe(tree)  # noqa: S308 (console.jsonview escapes every key and value)
    return mark_safe(f'<pre class="payload">{escape(_text(value))}</pre>')  # noqa: S308
