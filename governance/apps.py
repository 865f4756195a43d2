from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Governance"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from governance import checks  # noqa: F401 - registers the system checks
        from governance.ledger import event_appended
        from governance.models import TreeCheckpoint
        from governance.requests.builtin import kinds
        from governance.requests.notify import on_event_appended
        from governance.witnessing import on_checkpoint_stored

        # the registry, built once: an installed kind's own event types are then known to
        # the ledger (appends, ``governance verify``) before any is read or appended
        kinds()
        event_appended.connect(on_event_appended, dispatch_uid="governance-requests-notify")
        post_save.connect(
            on_checkpoint_stored, sender=TreeCheckpoint, dispatch_uid="governance-witness-push"
        )
