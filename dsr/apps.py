from __future__ import annotations

from django.apps import AppConfig


class DsrConfig(AppConfig):
    name = "dsr"
    verbose_name = "Data subject requests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from dsr.holds import open_legal_requests
        from governance.retention import hold_register

        hold_register(open_legal_requests)  # retention never expires what a DSR still needs
        from core.ledger import codes, signing
        from dsr.signed import table_mismatches
        from governance.ledger import opened_by_register, tables_register

        tables_register(table_mismatches)  # governance verify names every row that differs
        for purpose in signing.DSR_PURPOSES:  # a legal approval's request: its DSR_OPENED
            opened_by_register(f"legal-{purpose}", codes.DSR_OPENED)
