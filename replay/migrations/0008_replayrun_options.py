from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("replay", "0007_trace_expiry")]

    operations = [
        migrations.AddField(
            model_name="replayrun",
            name="options",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
