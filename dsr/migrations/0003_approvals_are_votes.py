"""A legal request's approvals become votes on governed requests (issue 19 item 1): each
(legal request, purpose) that has approvals gets a ``legal-<purpose>`` request (subject: the
legal request id; filed by its DSR_OPENED event), and each ``dsr_dsrapproval`` row its vote
in ``governance_vote`` (append-only there). The ledger is untouched."""

from __future__ import annotations

from django.db import migrations


def _carry_over(apps, schema_editor):
    Request = apps.get_model("governance", "GovernedRequest")
    Vote = apps.get_model("governance", "Vote")
    DsrApproval = apps.get_model("dsr", "DsrApproval")
    LegalRequest = apps.get_model("dsr", "LegalRequest")
    opened: dict[tuple[str, str], object] = {}
    for approval in DsrApproval.objects.order_by("id").iterator():
        key = (str(approval.request_id), approval.purpose)
        if key not in opened:
            legal = LegalRequest.objects.get(pk=approval.request_id)
            event = legal.opened_event
            opened[key] = Request.objects.create(
                kind=f"legal-{approval.purpose}",
                subject=str(legal.pk),
                payload=event.payload if event is not None else {},
                reason=legal.legal_basis,
                requested_by_id=legal.requested_by_id,
                created_at=legal.created_at,
                request_event_id=legal.opened_event_id,
            ).pk
        Vote.objects.create(
            request_id=opened[key],
            approver_id=approval.approver_id,
            role=approval.role,
            key_id=approval.key_id,
            decision="approve",
            reason=str((approval.payload or {}).get("reason", "")),
            payload=approval.payload,
            signature=approval.signature,
            event_id=approval.event_id,
            created_at=approval.created_at,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("dsr", "0002_approval_release_append_only"),
        ("governance", "0010_governed_request_and_vote"),
    ]

    operations = [
        migrations.RunPython(_carry_over, migrations.RunPython.noop),
        migrations.DeleteModel("DsrApproval"),
    ]
