"""What ContextOS, Verist and AHD reports say, pinned byte for byte (issue 31, item 1).

Every case of ``tests/replay/pipeline_cases.py`` (each fixture of the three formats the tests
use, passing, tampered, malformed and divergent, verified and replayed in audit mode through
the format's adapter and through the package's own functions, and every error code each format
declares in its ``codes``) must give, as ``json.dumps(report.to_json(), sort_keys=True)``, the
very bytes pinned in ``fixtures/pipeline_pins/<format>.json``. The pins were written by the
code as it was before the three formats moved to the one check pipeline
(``core/replay/pipeline.py``), by running once::

    .venv/bin/python tests/replay/fixtures/pipeline_pins/make_pins.py

and reviewed; the move left every one unchanged. Regenerate them only for a change in what a
report says, and review the diff.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from core.formats import formats
from core.formats.protocol import CONSOLE_CODES
from tests.replay.pipeline_cases import FORMATS, REGISTERED, dumped, outcome, pin_file


@cache
def pins(name: str) -> dict[str, Any]:
    return json.loads(pin_file(name).read_text())


@cache
def cases(name: str) -> dict[str, Any]:
    return FORMATS[name]()


def _reports(value: Any) -> list[dict[str, Any]]:
    """The reports a case's outcome holds (a report, several by name, or none)."""
    if not isinstance(value, dict) or "raises" in value:
        return []
    if "checks" in value:
        return [value]
    return [r for v in value.values() for r in _reports(v)]


ALL = [(name, case) for name in FORMATS for case in sorted(cases(name))]


@pytest.mark.parametrize(("name", "case"), ALL, ids=[f"{n}:{c}" for n, c in ALL])
def test_the_report_is_byte_equal_to_its_pin(name, case):
    assert dumped(outcome(cases(name)[case])) == dumped(pins(name)[case])


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_case_is_pinned_and_every_pin_is_a_case(name):
    assert sorted(pins(name)) == sorted(cases(name))


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_pins_cover_every_code_the_format_declares(name):
    fmt = formats().get(REGISTERED[name])
    found = {r["error_code"] for v in pins(name).values() for r in _reports(v)}
    assert set(fmt.codes) <= found
    assert found - {None} <= set(fmt.codes) | set(CONSOLE_CODES)
    assert None in found  # and passing reports
