"""An expression index on each payload key under which an event names a stored trace
(``governance.models.REFERENCE_KEYS``; ``governance.models.PayloadText``: ``payload ->>
'trace_id'`` on PostgreSQL, ``JSON_EXTRACT(payload, '$."trace_id"')`` on SQLite), so retention and evidence bundles find the events naming
some traces through six index lookups instead of reading the whole ledger. The keys are
written out here, as the migration froze them."""

from django.db import migrations, models

from governance.models import PayloadText

KEYS = ("trace_id", "trace_sha256", "file_sha256", "target_id", "snapshot_id", "run_id")


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0011_checkpoint_signatures_digest"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="governanceevent",
            index=models.Index(
                PayloadText(key),
                name=f"gov_event_ref_{key}",
            ),
        )
        for key in KEYS
    ]
