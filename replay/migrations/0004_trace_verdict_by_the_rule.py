"""Recompute every stored trace's verdict by the one rule (core/replay/verdicts.py): until now a
trace took the status of its last run, force-continued, sandbox and refused ones included."""

from django.db import migrations

from core.replay import verdicts


def recompute(apps, schema_editor):
    Trace = apps.get_model("replay", "Trace")
    ReplayRun = apps.get_model("replay", "ReplayRun")
    for trace in Trace.objects.only("id", "ingest_report", "last_status").iterator():
        runs = [
            verdicts.RunOutcome(
                mode=mode, status=status, error_code=code, authoritative=authoritative
            )
            for mode, status, code, authoritative in ReplayRun.objects.filter(
                trace_id=trace.id, state="done"
            )
            .order_by("finished_at", "created_at")
            .values_list("mode", "status", "error_code", "authoritative")
        ]
        ingest = (trace.ingest_report or {}).get("status") or "new"
        verdict = verdicts.trace_verdict(ingest=ingest, runs=runs)
        if verdict != trace.last_status:
            Trace.objects.filter(id=trace.id).update(last_status=verdict)


class Migration(migrations.Migration):
    dependencies = [
        ("replay", "0003_trace_copies_are_evidence"),
    ]

    operations = [
        migrations.RunPython(recompute, migrations.RunPython.noop, elidable=True),
    ]
