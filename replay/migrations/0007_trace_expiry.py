from __future__ import annotations

from django.db import migrations, models

from replay.dbguards import expiry_only_operation


class Migration(migrations.Migration):
    dependencies = [
        # both 0005s: replay's merge migration 0006 was removed (no merge migrations)
        ("replay", "0005_reports_kept_as_exact_json_text"),
        ("replay", "0005_trace_page_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="blob",
            name="expired_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="trace",
            name="expired_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="trace",
            name="expiry_rule",
            field=models.CharField(blank=True, max_length=200),
        ),
        # retention sets replay_blob.expired_at once; every other rewrite is still refused
        expiry_only_operation(
            "replay_blob", ("id", "sha256", "size", "storage_name", "created_at"), "expired_at"
        ),
    ]
