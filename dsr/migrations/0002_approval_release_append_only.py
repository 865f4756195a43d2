"""A legal request's approval and release rows are append-only in the database, like the
ledger and the council's approvals: UPDATE, DELETE and TRUNCATE are refused on SQLite and
PostgreSQL (``replay.dbguards``); inserting stays allowed, and ``governance verify`` names
every row its ledger event does not back."""

from __future__ import annotations

from django.db import migrations

from replay.dbguards import migration_operation


class Migration(migrations.Migration):
    dependencies = [("dsr", "0001_initial")]

    operations = [
        migration_operation("dsr_dsrapproval"),
        migration_operation("dsr_dsrrelease"),
    ]
