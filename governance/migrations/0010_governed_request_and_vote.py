"""One governed request and one vote for every kind (issue 19 item 1).

``governance_request`` holds what every request has; the force-continue, production replay
and role grant tables become its 1:1 detail tables (multi-table inheritance, the same ids);
``governance_vote`` replaces ``governance_approval`` (same ids), each vote pointing at its
request only. A halt with votes gets a ``halt-clear`` request (its halt event filed it; its
FORCE_HALT_CLEAR event, if any, decided it). The ledger is untouched. ``governance_vote`` is
append-only in the database like the event table; the request tables allow only the updates a
decision makes (pending to approved or rejected, its event and time, the run it queued) and no
DELETE or TRUNCATE.
"""

from __future__ import annotations

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from replay.dbguards import decision_only_operation, migration_operation

_KINDS = (
    ("OldForceContinueRequest", "ForceContinueRequest", "force-continue", "run_id", "request"),
    ("OldProductionReplayRequest", "ProductionReplayRequest", "production-replay", "trace_id",
     "production"),
    ("OldRoleGrantRequest", "RoleGrantRequest", "role-grant", "user_id", "role_grant"),
)
_DETAIL = {
    "ForceContinueRequest": ("run_id", "step", "divergence_digest", "resumed_run_id"),
    "ProductionReplayRequest": ("trace_id", "run_id"),
    "RoleGrantRequest": ("user_id", "roles"),
}
_COMMON = (
    "reason", "requested_by_id", "expires_at", "state", "created_at", "request_event_id",
    "decision_event_id", "decided_at",
)


def _carry_over(apps, schema_editor):
    from core.ledger import codes

    Event = apps.get_model("governance", "GovernanceEvent")
    Request = apps.get_model("governance", "GovernedRequest")
    Approval = apps.get_model("governance", "Approval")
    Vote = apps.get_model("governance", "Vote")
    for old_name, new_name, kind, subject, _link in _KINDS:
        Old = apps.get_model("governance", old_name)
        New = apps.get_model("governance", new_name)
        for old in Old.objects.order_by("created_at", "id").iterator():
            event = Event.objects.get(seq=old.request_event_id)
            Request.objects.create(
                id=old.id,
                kind=kind,
                subject=str(getattr(old, subject)),
                payload=event.payload,
                **{name: getattr(old, name) for name in _COMMON},
            )
            detail = New(
                governedrequest_ptr_id=old.id,
                **{name: getattr(old, name) for name in _DETAIL[new_name]},
            )
            detail.save_base(raw=True)
    clear_code = codes.code_of(codes.FORCE_HALT_CLEAR)
    halt_requests: dict[int, uuid.UUID] = {}
    for approval in Approval.objects.order_by("id").iterator():
        request_id = approval.request_id or approval.production_id or approval.role_grant_id
        if request_id is None:
            halt_seq = approval.halt_id
            if halt_seq not in halt_requests:
                halt = Event.objects.get(seq=halt_seq)
                clear = (
                    Event.objects.filter(code=clear_code, payload__halt_seq=halt_seq)
                    .order_by("seq")
                    .first()
                )
                halt_requests[halt_seq] = Request.objects.create(
                    kind="halt-clear",
                    subject=str(halt_seq),
                    payload=halt.payload,
                    reason=str((halt.payload or {}).get("reason", "")),
                    state="approved" if clear is not None else "pending",
                    created_at=halt.created_at,
                    request_event_id=halt_seq,
                    decision_event_id=clear.seq if clear is not None else None,
                    decided_at=clear.created_at if clear is not None else None,
                ).id
            request_id = halt_requests[halt_seq]
        Vote.objects.create(
            id=approval.id,
            request_id=request_id,
            approver_id=approval.approver_id,
            role=approval.role,
            key_id=approval.key_id,
            decision=approval.decision,
            reason=approval.reason,
            payload=approval.payload,
            signature=approval.signature,
            event_id=approval.event_id,
            created_at=approval.created_at,
        )
    if schema_editor.connection.vendor == "postgresql":
        from django.core.management.color import no_style

        for sql in schema_editor.connection.ops.sequence_reset_sql(no_style(), [Vote]):
            schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0009_witness_cosignatures"),
        ("replay", "0003_trace_copies_are_evidence"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="GovernedRequest",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True,
                                        serialize=False)),
                ("kind", models.CharField(max_length=64)),
                ("subject", models.CharField(max_length=200)),
                ("payload", models.JSONField(default=dict)),
                ("reason", models.TextField(blank=True)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("state", models.CharField(
                    choices=[("pending", "pending"), ("approved", "approved"),
                             ("rejected", "rejected")],
                    default="pending", max_length=16)),
                ("created_at", models.DateTimeField()),
                ("decided_at", models.DateTimeField(blank=True, null=True)),
                ("decision_event", models.OneToOneField(
                    blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                    related_name="+", to="governance.governanceevent")),
                ("request_event", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT, related_name="+",
                    to="governance.governanceevent")),
                ("requested_by", models.ForeignKey(
                    blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                    related_name="+", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "db_table": "governance_request",
                "ordering": ["-created_at"],
                "constraints": [models.UniqueConstraint(
                    fields=("kind", "request_event"),
                    name="governance_request_one_per_filing")],
            },
        ),
        migrations.CreateModel(
            name="Vote",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("role", models.CharField(max_length=16)),
                ("decision", models.CharField(
                    choices=[("approve", "approve"), ("deny", "deny")], max_length=8)),
                ("reason", models.TextField(blank=True)),
                ("payload", models.JSONField()),
                ("signature", models.CharField(max_length=128)),
                ("created_at", models.DateTimeField()),
                ("approver", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="governance_votes_new", to=settings.AUTH_USER_MODEL)),
                ("event", models.OneToOneField(
                    on_delete=django.db.models.deletion.PROTECT, related_name="+",
                    to="governance.governanceevent")),
                ("key", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT, related_name="votes_new",
                    to="governance.memberkey")),
                ("request", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT, related_name="approvals",
                    to="governance.governedrequest")),
            ],
            options={
                "db_table": "governance_vote",
                "ordering": ["created_at", "id"],
                "constraints": [
                    models.UniqueConstraint(fields=("request", "approver"),
                                            name="governance_vote_once_per_person"),
                    models.UniqueConstraint(fields=("request", "key"),
                                            name="governance_vote_once_per_key"),
                ],
            },
        ),
        # the old per-kind tables step aside (their reverse names freed) for the detail tables
        *[migrations.RenameModel(new, old) for old, new, *_ in _KINDS],
        migrations.AlterField(
            "oldforcecontinuerequest", "run",
            models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                              to="replay.replayrun")),
        migrations.AlterField(
            "oldforcecontinuerequest", "resumed_run",
            models.OneToOneField(blank=True, null=True,
                                 on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                 to="replay.replayrun")),
        migrations.AlterField(
            "oldproductionreplayrequest", "trace",
            models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                              to="replay.trace")),
        migrations.AlterField(
            "oldproductionreplayrequest", "run",
            models.OneToOneField(blank=True, null=True,
                                 on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                 to="replay.replayrun")),
        migrations.AlterField(
            "oldrolegrantrequest", "user",
            models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                              to=settings.AUTH_USER_MODEL)),
        migrations.CreateModel(
            name="ForceContinueRequest",
            fields=[
                ("governedrequest_ptr", models.OneToOneField(
                    auto_created=True, on_delete=django.db.models.deletion.CASCADE,
                    parent_link=True, primary_key=True, serialize=False,
                    to="governance.governedrequest")),
                ("step", models.IntegerField()),
                ("divergence_digest", models.CharField(max_length=71)),
                ("resumed_run", models.OneToOneField(
                    blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                    related_name="force_continue_origin", to="replay.replayrun")),
                ("run", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="force_continue_requests", to="replay.replayrun")),
            ],
            options={"ordering": ["-created_at"]},
            bases=("governance.governedrequest",),
        ),
        migrations.CreateModel(
            name="ProductionReplayRequest",
            fields=[
                ("governedrequest_ptr", models.OneToOneField(
                    auto_created=True, on_delete=django.db.models.deletion.CASCADE,
                    parent_link=True, primary_key=True, serialize=False,
                    to="governance.governedrequest")),
                ("run", models.OneToOneField(
                    blank=True, null=True, on_delete=django.db.models.deletion.PROTECT,
                    related_name="production_approval", to="replay.replayrun")),
                ("trace", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT,
                    related_name="production_requests", to="replay.trace")),
            ],
            options={"ordering": ["-created_at"]},
            bases=("governance.governedrequest",),
        ),
        migrations.CreateModel(
            name="RoleGrantRequest",
            fields=[
                ("governedrequest_ptr", models.OneToOneField(
                    auto_created=True, on_delete=django.db.models.deletion.CASCADE,
                    parent_link=True, primary_key=True, serialize=False,
                    to="governance.governedrequest")),
                ("roles", models.JSONField()),
                ("user", models.ForeignKey(
                    on_delete=django.db.models.deletion.PROTECT, related_name="role_grants",
                    to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created_at"]},
            bases=("governance.governedrequest",),
        ),
        migrations.RunPython(_carry_over, migrations.RunPython.noop),
        migrations.DeleteModel("Approval"),
        migrations.DeleteModel("OldForceContinueRequest"),
        migrations.DeleteModel("OldProductionReplayRequest"),
        migrations.DeleteModel("OldRoleGrantRequest"),
        migrations.AlterField(
            "vote", "approver",
            models.ForeignKey(on_delete=django.db.models.deletion.PROTECT,
                              related_name="governance_approvals", to=settings.AUTH_USER_MODEL)),
        migrations.AlterField(
            "vote", "key",
            models.ForeignKey(on_delete=django.db.models.deletion.PROTECT,
                              related_name="approvals", to="governance.memberkey")),
        migration_operation("governance_vote"),
        # a request row changes only as the ledger's decision does; none is deleted
        decision_only_operation(
            "governance_request",
            fixed=("id", "kind", "subject", "payload", "reason", "requested_by_id",
                   "expires_at", "created_at", "request_event_id"),
            decision=True,
        ),
        decision_only_operation(
            "governance_forcecontinuerequest",
            fixed=("governedrequest_ptr_id", "run_id", "step", "divergence_digest"),
            once=("resumed_run_id",),
        ),
        decision_only_operation(
            "governance_productionreplayrequest",
            fixed=("governedrequest_ptr_id", "trace_id"),
            once=("run_id",),
        ),
        decision_only_operation(
            "governance_rolegrantrequest", fixed=("governedrequest_ptr_id", "user_id", "roles")
        ),
    ]
