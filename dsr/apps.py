from __future__ import annotations

from django.apps import AppConfig


class DsrConfig(AppConfig):
    name = "dsr"
    verbose_name = "Data subject requests"
    default_auto_field = "django.db.models.BigAutoField"
