# An erasure (otel.erasure, called by privacy.erasure.shred) deletes the raw OTLP bodies of a
# trace from the blob store and replaces its span rows' records by a tombstone: each the one
# update the database lets through on these append-only tables (replay.dbguards).

import django.db.models.deletion
from django.db import migrations, models

from replay.dbguards import erasure_only_operation

BODY_COLUMNS = (
    "id", "sha256", "size", "content_type", "storage_name", "span_count", "rejected_count",
    "event_seq", "received_by_id", "received_at",
)
SPAN_COLUMNS = (
    "id", "trace_id", "span_id", "digest", "parent_span_id", "name", "start_ns", "end_ns",
    "body_id", "received_at",
)
# otel.models.SPAN_TOMBSTONE_JSON, spelt here so the migration never changes with the model
SPAN_TOMBSTONE_JSON = '{"erased": true}'


class Migration(migrations.Migration):

    dependencies = [
        ('otel', '0003_trace_facts'),
    ]

    operations = [
        migrations.AddField(
            model_name='otelspan',
            name='erased_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='otlpbody',
            name='erased_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='ErasedBodyBytes',
            fields=[
                ('body', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, primary_key=True, serialize=False, to='otel.otlpbody')),
                ('storage_name', models.CharField(max_length=255)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        # erased_at set once (and, for a span, its record set to the tombstone with it);
        # every other rewrite, DELETE and TRUNCATE still refused
        erasure_only_operation("otel_otlpbody", BODY_COLUMNS, "erased_at"),
        erasure_only_operation(
            "otel_otelspan", SPAN_COLUMNS, "erased_at", {"record": SPAN_TOMBSTONE_JSON}
        ),
    ]
