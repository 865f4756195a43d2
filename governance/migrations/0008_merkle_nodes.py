"""The ledger's Merkle tree (``MerkleNode``) and its signed checkpoints (``TreeCheckpoint``),
both append-only in the database; the tree is filled for the events already in the ledger
(leaf: the ASCII of each event's ``hash``, in seq order; see ``governance.transparency``)."""

from django.db import migrations, models

from replay.dbguards import migration_operation
from tlog import merkle

BATCH = 5000


def backfill(apps, schema_editor):
    event_model = apps.get_model("governance", "GovernanceEvent")
    node_model = apps.get_model("governance", "MerkleNode")
    edge: dict[int, tuple[int, bytes]] = {}

    def get(level, index):
        return edge[level][1]

    pending = []
    events = event_model.objects.order_by("seq").values_list("seq", "hash")
    for expected, (seq, event_hash) in enumerate(events.iterator(chunk_size=BATCH), start=1):
        if seq != expected:
            break  # a gap: the chain does not verify; the tree stops before it
        leaf = merkle.leaf_hash(event_hash.encode("ascii"))
        for level, index, value in merkle.append_leaf(seq - 1, leaf, get):
            edge[level] = (index, value)
            pending.append(node_model(level=level, index=index, hash=value))
        if len(pending) >= BATCH:
            node_model.objects.bulk_create(pending)
            pending = []
    node_model.objects.bulk_create(pending)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_verification_staleness"),
    ]

    operations = [
        migrations.CreateModel(
            name="MerkleNode",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("level", models.PositiveSmallIntegerField()),
                ("index", models.BigIntegerField()),
                ("hash", models.BinaryField(max_length=32)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("level", "index"), name="governance_merklenode_at"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TreeCheckpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("size", models.BigIntegerField()),
                ("root_hash", models.BinaryField(max_length=32)),
                ("note", models.TextField()),
                ("key_id", models.CharField(max_length=128)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "ordering": ["-size", "-id"],
                "indexes": [models.Index(fields=["size"], name="governance_treecp_size")],
            },
        ),
        migration_operation("governance_merklenode"),
        migration_operation("governance_treecheckpoint"),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
