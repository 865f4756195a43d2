from __future__ import annotations

from django.db import migrations

from replay.dbguards import migration_operation


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]

    operations = [
        migration_operation("governance_governanceevent"),
        migration_operation("governance_approval"),
    ]
