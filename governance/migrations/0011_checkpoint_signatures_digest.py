"""A checkpoint's running digest of the server signatures it covers, signed next to it
(``TreeCheckpoint.signatures_digest``/``signatures_signature``): with it, full verification
checks one Ed25519 signature per checkpoint instead of one per event. Nullable: checkpoints
signed before it keep their events verifying the old way."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0010_governed_request_and_vote"),
    ]

    operations = [
        migrations.AddField(
            model_name="treecheckpoint",
            name="signatures_digest",
            field=models.BinaryField(max_length=32, null=True),
        ),
        migrations.AddField(
            model_name="treecheckpoint",
            name="signatures_signature",
            field=models.CharField(max_length=128, blank=True, default=""),
        ),
    ]
