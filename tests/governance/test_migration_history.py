"""The model history has no merge migration, and a database that applied the merge migrations
governance and replay once had (``0005_merge_0004_api_tokens_0004_role_grant_requests``,
``0006_merge_reports_text_and_trace_index``, removed: the next migration depends on both
parents directly) still migrates clean, the stale rows ignored until ``migrate APP --prune``
removes them (docs/deployment.md)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

OLD_MERGE = "0005_merge_0004_api_tokens_0004_role_grant_requests"
OLD_REPLAY_MERGE = "0006_merge_reports_text_and_trace_index"
APPS = ("replay", "governance", "console", "privacy", "dsr")


def test_no_app_has_a_merge_migration_or_two_leaves():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    merges = [
        key
        for key, migration in loader.disk_migrations.items()
        if key[0] in APPS
        and len([d for d in migration.dependencies if d[0] == key[0]]) > 1
        and not migration.operations
    ]
    assert merges == []
    leaves = {app: [n for a, n in loader.graph.leaf_nodes() if a == app] for app in APPS}
    assert all(len(names) == 1 for names in leaves.values()), leaves
    marks = loader.disk_migrations[("governance", "0006_ledger_verification_marks")]
    assert {d for d in marks.dependencies if d[0] == "governance"} == {
        ("governance", "0004_api_tokens"),
        ("governance", "0004_role_grant_requests"),
    }
    expiry = loader.disk_migrations[("replay", "0007_trace_expiry")]
    assert set(expiry.dependencies) == {
        ("replay", "0005_reports_kept_as_exact_json_text"),
        ("replay", "0005_trace_page_index"),
    }


@pytest.mark.django_db
def test_a_database_that_applied_the_old_merge_migrates_clean_and_prunes_it():
    recorder = MigrationRecorder(connection)
    recorder.record_applied("governance", OLD_MERGE)  # what main's history recorded

    call_command("migrate", "--check", stdout=StringIO())  # exits 1 if anything is unapplied
    shown = StringIO()
    call_command("showmigrations", "governance", stdout=shown)
    lines = shown.getvalue().splitlines()
    assert "[ ]" not in shown.getvalue()
    assert OLD_MERGE not in shown.getvalue()
    assert lines[5:7] == [" [X] 0004_api_tokens", " [X] 0006_ledger_verification_marks"]

    pruned = StringIO()
    call_command("migrate", "governance", "--prune", stdout=pruned)
    assert f"Pruning governance.{OLD_MERGE} OK" in pruned.getvalue()
    assert not recorder.migration_qs.filter(app="governance", name=OLD_MERGE).exists()


@pytest.mark.django_db
def test_a_database_that_applied_replays_old_merge_migrates_clean_and_prunes_it():
    recorder = MigrationRecorder(connection)
    recorder.record_applied("replay", OLD_REPLAY_MERGE)  # what the history recorded before

    call_command("migrate", "--check", stdout=StringIO())
    shown = StringIO()
    call_command("showmigrations", "replay", stdout=shown)
    assert "[ ]" not in shown.getvalue()
    assert OLD_REPLAY_MERGE not in shown.getvalue()

    pruned = StringIO()
    call_command("migrate", "replay", "--prune", stdout=pruned)
    assert f"Pruning replay.{OLD_REPLAY_MERGE} OK" in pruned.getvalue()
    assert not recorder.migration_qs.filter(app="replay", name=OLD_REPLAY_MERGE).exists()
