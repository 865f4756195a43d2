"""System checks (``manage.py check``): misconfigurations that would let the chain fork."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register

from governance import conf


@register(Tags.database)
def ledger_serialisable(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return problems(
        databases=settings.DATABASES,
        quorum=conf.council_quorum_setting(),
    )


def problems(*, databases: Mapping[str, Mapping[str, Any]], quorum: Any) -> list[Error]:
    errors: list[Error] = []
    for alias, db in databases.items():
        engine = db.get("ENGINE", "")
        if engine == "django.db.backends.sqlite3":
            mode = (db.get("OPTIONS") or {}).get("transaction_mode")
            if mode != "IMMEDIATE":
                errors.append(
                    Error(
                        f"database {alias!r}: SQLite must open transactions IMMEDIATE "
                        "(OPTIONS['transaction_mode']) so ledger appends are serialised",
                        id="governance.E001",
                    )
                )
        elif engine not in ("django.db.backends.postgresql",):
            errors.append(
                Error(
                    f"database {alias!r}: the governance ledger supports SQLite and "
                    f"PostgreSQL only, not {engine}",
                    id="governance.E002",
                )
            )
    if not isinstance(quorum, int) or quorum < 1:
        errors.append(
            Error("GOVERNANCE_COUNCIL_QUORUM must be an integer >= 1", id="governance.E003")
        )
    return errors
