from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("replay", "0011_trace_filename_search")]

    operations = [
        migrations.AddField(
            model_name="trace",
            name="uploaded_label",
            field=models.CharField(blank=True, max_length=150),
        ),
    ]
