"""A JSON model field kept as its exact text.

Django's JSONField is ``jsonb`` on PostgreSQL, which rewrites numbers: a float such as
``2.678192983196815e+16`` reads back as the integer ``26781929831968150``, a different value
in Python, so a report stored there would no longer say exactly what the engine said. A
report (and an ingest report) is stored as the JSON text the console wrote and parsed back
as it was, on SQLite and PostgreSQL alike. Nothing queries inside these columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:  # the stubs' TextField is generic over (set, get) types; Django's is not
    _Text = models.TextField[Any, Any]
else:
    _Text = models.TextField


class JSONTextField(_Text):
    """A JSON document stored as text and read back exactly (floats stay floats)."""

    description = "JSON kept as its text"
    if TYPE_CHECKING:  # what django-stubs' plugin reads: any JSON value in, any out
        _pyi_private_set_type: Any
        _pyi_private_get_type: Any

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value)
        return value

    def get_prep_value(self, value: Any) -> Any:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def value_to_string(self, obj: Any) -> str:
        return self.get_prep_value(self.value_from_object(obj)) or ""
