from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from governance import checks  # noqa: F401 - registers the system checks
        from governance.ledger import event_appended
        from governance.requests.notify import on_event_appended

        event_appended.connect(on_event_appended, dispatch_uid="governance-requests-notify")
