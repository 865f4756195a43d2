"""Each format declares its own error codes (``codes`` on its adapter), each one defined in
``core/errors.py`` and documented in ``docs/error-codes.md``, the per-format table listing
exactly what each adapter declares. That every code a format's tests observe is declared is
checked by ``tests/conftest.py`` on every test (``format_codes_undeclared``); the last test
here shows that check failing a report with an undeclared code."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from core import errors
from core.formats import formats, protocol
from core.replay.report import ReplayReport
from tests.toyformat.adapter import ToyFormat

DOC = Path(__file__).resolve().parents[2] / "docs" / "error-codes.md"
_ROW = re.compile(r"^\| `([a-z-]+)` \| (.+) \|$")


def documented_codes() -> set[str]:
    """The codes of the doc's first table (``| `CODE` | when |``)."""
    text = DOC.read_text()
    table = text.split("## Codes by format")[0]
    return set(re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE))


def codes_by_format() -> dict[str, set[str]]:
    section = DOC.read_text().split("## Codes by format")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        found = _ROW.match(line)
        if found:
            rows[found.group(1)] = set(re.findall(r"`([A-Z_]+)`", found.group(2)))
    return rows


def test_every_error_code_is_documented_and_every_documented_code_is_defined():
    assert documented_codes() == set(errors.ERROR_CODES)


def test_every_format_declares_its_codes_and_the_doc_lists_exactly_them():
    declared = {fmt.name: set(fmt.codes) for fmt in formats()}
    assert declared == codes_by_format()
    assert declared["paxman-artifact"] == {
        errors.MALFORMED_TRACE,
        errors.VERSION_MISMATCH,
        errors.CAPABILITY_NOT_FOUND,
        errors.HASH_MISMATCH,
        errors.INVALID_CONTRACT,
    }
    for fmt in formats():
        assert protocol.codes_problem(fmt) is None, fmt.name
        assert set(fmt.codes) <= documented_codes(), fmt.name
        assert set(fmt.unstorable_codes) <= set(fmt.codes), fmt.name


def test_the_console_codes_are_documented_and_no_format_declares_them():
    assert documented_codes() >= protocol.CONSOLE_CODES
    section = DOC.read_text().split("## Codes by format")[1].split("\n## ")[0]
    for code in protocol.CONSOLE_CODES:
        assert f"`{code}`" in section.split("| format |")[0]
    assert all(not (fmt.codes & protocol.CONSOLE_CODES) for fmt in formats())


def test_the_toy_format_declares_its_own_codes():
    toy = ToyFormat()
    assert toy.codes == {errors.MALFORMED_TRACE, errors.INTEGRITY_FAILURE}
    assert protocol.codes_problem(toy) is None
    assert toy.codes <= documented_codes()


def fake(**attrs):
    return SimpleNamespace(name="x-format", unstorable_codes=frozenset(), **attrs)


@pytest.mark.parametrize(
    ("attrs", "problem"),
    [
        ({}, "declares no error codes (codes: a frozenset of core.errors codes)"),
        (
            {"codes": frozenset()},
            "declares no error codes (codes: a frozenset of core.errors codes)",
        ),
        (
            {"codes": {errors.MALFORMED_TRACE}},
            "declares no error codes (codes: a frozenset of core.errors codes)",
        ),
        (
            {"codes": frozenset({errors.MALFORMED_TRACE, "TOY_BROKEN", "A_BAD"})},
            "declares codes core/errors.py does not define: A_BAD, TOY_BROKEN",
        ),
        (
            {"codes": frozenset({errors.MALFORMED_TRACE, errors.TRACE_EXPIRED})},
            "declares the console's own codes (CONSOLE_CODES): TRACE_EXPIRED",
        ),
    ],
)
def test_a_format_with_bad_codes_is_not_registered(attrs, problem):
    registry = protocol.FormatRegistry()
    with pytest.raises(ValueError, match=re.escape(problem)) as refused:
        registry.register(fake(**attrs))
    assert str(refused.value) == f"format 'x-format': {problem}"
    assert registry.names() == []


def test_a_format_refusing_storage_with_an_undeclared_code_is_not_registered():
    fmt = fake(codes=frozenset({errors.MALFORMED_TRACE}))
    fmt.unstorable_codes = frozenset({errors.MALFORMED_TRACE, errors.MISSING_SNAPSHOT})
    with pytest.raises(ValueError, match="MISSING_SNAPSHOT") as refused:
        protocol.FormatRegistry().register(fmt)
    assert str(refused.value) == (
        "format 'x-format': refuses storing with codes it does not declare: MISSING_SNAPSHOT"
    )


def test_declares_takes_the_formats_codes_and_the_consoles_only():
    paxman = formats().get("paxman-artifact")
    assert protocol.declares(paxman, errors.HASH_MISMATCH)
    assert protocol.declares(paxman, errors.FORCE_HALT_ACTIVE)
    assert not protocol.declares(paxman, errors.INTEGRITY_FAILURE)
    assert not protocol.declares(paxman, errors.REPLAY_DIVERGENCE)


def test_a_report_with_an_undeclared_code_is_what_fails_a_test_at_teardown(
    format_codes_undeclared,
):
    undeclared = format_codes_undeclared  # what tests/conftest.py asserts empty at teardown
    ReplayReport(trace_id="t", format="paxman-artifact", mode="audit").fail(
        errors.HASH_MISMATCH, "a Paxman verdict"
    )
    ReplayReport(trace_id="t", format="paxman-artifact", mode="audit").fail(
        errors.FORCE_HALT_ACTIVE, "the console's own"
    )
    ReplayReport(trace_id="t", format="made-up-format", mode="audit").fail(
        errors.REPLAY_DIVERGENCE, "no registry knows it"
    )
    assert undeclared == []
    ReplayReport(trace_id="t", format="paxman-artifact", mode="audit").refuse(
        errors.INTEGRITY_FAILURE, "not a Paxman verdict"
    )
    assert undeclared == ["paxman-artifact reported INTEGRITY_FAILURE, which it does not declare"]
    undeclared.clear()  # or this test would fail at teardown, as it should
