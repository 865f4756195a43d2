"""System checks catch a database set-up under which ledger appends could fork."""

from __future__ import annotations

from governance.checks import ledger_serialisable, problems

SQLITE = "django.db.backends.sqlite3"


def test_the_project_settings_pass():
    assert ledger_serialisable() == []


def test_it_refuses_sqlite_without_immediate_transactions():
    found = problems(databases={"default": {"ENGINE": SQLITE, "OPTIONS": {}}}, quorum=2)
    assert [e.id for e in found] == ["governance.E001"]
    immediate = {"ENGINE": SQLITE, "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    assert problems(databases={"default": immediate}, quorum=2) == []


def test_it_refuses_another_database_and_a_bad_quorum():
    found = problems(databases={"default": {"ENGINE": "django.db.backends.mysql"}}, quorum=0)
    assert [e.id for e in found] == ["governance.E002", "governance.E003"]
