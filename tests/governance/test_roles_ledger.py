"""Role changes go through the ledger: who changed whom, never one's own, admin and council
only with a council quorum's signatures, and approvals count only in roles the ledger says
the signer held before the request was filed."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from core.ledger import codes, signing
from governance import membership, selectors, services
from governance.models import GovernanceEvent, RoleGrantRequest, Vote
from tests.governance.factories import approve, enrol, filed_request, person

pytestmark = pytest.mark.django_db


def _user(name: str) -> User:
    return User.objects.create_user(name, f"{name}@example.com", "pw")


def _last() -> GovernanceEvent:
    return GovernanceEvent.objects.order_by("-seq").first()


def _refused(code: str, call, *args, **kwargs) -> codes.GovernanceError:
    before = GovernanceEvent.objects.count()
    with pytest.raises(codes.GovernanceError) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code
    assert GovernanceEvent.objects.count() == before
    return caught.value


def _grant_signature(signer, request, decision=signing.APPROVE):
    return signer.sign(services.role_grant_payload_for(request=request, decision=decision))


class TestChanges:
    def test_an_admin_changes_someone_elses_roles_with_a_signed_event(self):
        bob, nina = person("bob"), _user("nina")
        change = services.user_roles_change(
            actor=bob, user=nina, roles=["viewer", "auditor"], reason="joined the audit team"
        )
        event = _last()
        assert change.event == event
        assert change.grant is None
        assert (event.type, event.code, event.actor_id, event.actor_label) == (
            codes.ROLES_CHANGED,
            701,
            bob.pk,
            "bob",
        )
        assert event.payload == {
            "user_id": nina.pk,
            "username": "nina",
            "roles_before": [],
            "roles_after": ["auditor", "viewer"],
            "reason": "joined the audit team",
        }
        assert event.server_signature
        assert membership.roles_held(User.objects.get(pk=nina.pk)) == {"viewer", "auditor"}
        assert set(nina.groups.values_list("name", flat=True)) == {"viewer", "auditor"}
        assert selectors.ledger_verify().ok

    def test_an_admin_revokes_admin_at_once(self):
        bob, grace = person("bob"), person("grace")
        services.user_roles_change(actor=bob, user=grace, roles=[], reason="left")
        assert _last().payload["roles_before"] == ["admin"]
        assert membership.roles_held(User.objects.get(pk=grace.pk)) == frozenset()

    def test_it_refuses_changing_ones_own_roles(self):
        bob = person("bob")
        error = _refused(
            codes.ROLE_SELF,
            services.user_roles_change,
            actor=bob,
            user=User.objects.get(pk=bob.pk),
            roles=["admin", "council"],
            reason="me",
        )
        assert error.message == "bob cannot change their own roles: ask another admin"

    def test_it_refuses_someone_who_is_not_an_admin(self):
        error = _refused(
            codes.REQUEST_ROLE,
            services.user_roles_change,
            actor=person("carol"),
            user=_user("nina"),
            roles=["viewer"],
        )
        assert error.message == ("carol does not hold the admin role: only an admin changes roles")

    def test_it_refuses_an_unknown_role(self):
        error = _refused(
            codes.ROLE_UNKNOWN,
            services.user_roles_change,
            actor=person("bob"),
            user=_user("nina"),
            roles=["root"],
        )
        assert error.message == (
            "'root' is not a role (the roles are viewer, auditor, operator, admin, council, legal)"
        )

    def test_an_admin_who_is_one_only_by_a_group_changes_nothing(self):
        mallory = _user("mallory")
        mallory.groups.add(Group.objects.get_or_create(name="admin")[0])
        _refused(
            codes.REQUEST_ROLE,
            services.user_roles_change,
            actor=mallory,
            user=_user("nina"),
            roles=["viewer"],
        )


class TestGrantsNeedTheCouncil:
    @pytest.fixture
    def council(self):
        return {name: enrol(name) for name in ("carol", "dave", "erin")}

    def test_granting_council_files_a_request_and_changes_nothing_yet(self, council):
        bob, nina = person("bob"), _user("nina")
        change = services.user_roles_change(
            actor=bob, user=nina, roles=["viewer", "council"], reason="elected"
        )
        assert change.event is not None
        assert change.event.payload["roles_after"] == ["viewer"]
        grant = change.grant
        assert (grant.state, grant.roles, grant.requested_by) == ("pending", ["council"], bob)
        event = grant.request_event
        assert (event.type, event.code, event.actor_id) == (codes.ROLE_GRANT_REQUEST, 702, bob.pk)
        assert event.payload == {
            "request_id": str(grant.id),
            "user_id": nina.pk,
            "username": "nina",
            "grant": ["council"],
            "requested_by": "bob",
            "reason": "elected",
            "expires_at": signing.format_time(grant.expires_at),
            "council_required": 2,
            "deny_threshold": 1,
        }
        assert event.idempotency_key == f"role-grant-request:{grant.id}"
        assert membership.roles_held(User.objects.get(pk=nina.pk)) == {"viewer"}

    def test_a_council_quorum_makes_the_grant_take_effect(self, council):
        bob, nina = person("bob"), _user("nina")
        grant = services.user_roles_change(
            actor=bob, user=nina, roles=["admin"], reason="new ops lead"
        ).grant
        for name in ("carol", "dave"):
            services.role_grant_approval_record(
                request=grant,
                approver=council[name].user,
                document=_grant_signature(council[name], grant),
            )
        grant.refresh_from_db()
        assert grant.state == RoleGrantRequest.State.APPROVED
        decided = grant.decision_event
        assert (decided.type, decided.code) == (codes.ROLE_GRANT_APPROVED, 704)
        assert decided.payload == {
            "request_id": str(grant.id),
            "user_id": nina.pk,
            "username": "nina",
            "roles_before": [],
            "roles_after": ["admin"],
            "grant": ["admin"],
            "requested_by": "bob",
            "approval_seqs": list(
                grant.approvals.order_by("event_id").values_list("event_id", flat=True)
            ),
            "council": 2,
            "denials": 0,
        }
        assert decided.idempotency_key == f"role-grant-decision:{grant.id}"
        assert membership.roles_held(User.objects.get(pk=nina.pk)) == {"admin"}
        assert Vote.objects.filter(request=grant).count() == 2
        assert selectors.ledger_verify().ok

    def test_one_council_signature_is_not_enough(self, council):
        nina = _user("nina")
        grant = services.user_roles_change(
            actor=person("bob"), user=nina, roles=["council"], reason="elected"
        ).grant
        services.role_grant_approval_record(
            request=grant,
            approver=council["carol"].user,
            document=_grant_signature(council["carol"], grant),
        )
        grant.refresh_from_db()
        assert grant.state == RoleGrantRequest.State.PENDING
        assert membership.roles_held(User.objects.get(pk=nina.pk)) == frozenset()

    def test_a_signed_denial_rejects_the_grant(self, council):
        nina = _user("nina")
        grant = services.user_roles_change(
            actor=person("bob"), user=nina, roles=["council"], reason="elected"
        ).grant
        services.role_grant_approval_record(
            request=grant,
            approver=council["carol"].user,
            document=_grant_signature(council["carol"], grant, signing.DENY),
        )
        grant.refresh_from_db()
        assert grant.state == RoleGrantRequest.State.REJECTED
        assert grant.decision_event.type == codes.ROLE_GRANT_REJECTED
        assert grant.decision_event.payload == {
            "request_id": str(grant.id),
            "user_id": nina.pk,
            "username": "nina",
            "roles_before": [],
            "roles_after": [],
            "grant": ["council"],
            "requested_by": "bob",
            "approval_seqs": [grant.approvals.get().event_id],
            "council": 0,
            "denials": 1,
        }
        assert grant.decision_event.idempotency_key == f"role-grant-decision:{grant.id}"
        assert membership.roles_held(User.objects.get(pk=nina.pk)) == frozenset()

    def test_it_refuses_a_decision_it_does_not_know(self, council):
        grant = services.user_roles_change(
            actor=person("bob"), user=_user("nina"), roles=["council"], reason="elected"
        ).grant
        carol = council["carol"]
        payload = services.role_grant_payload_for(request=grant, decision=signing.APPROVE)
        payload["decision"] = "abstain"
        error = _refused(
            codes.APPROVAL_MALFORMED,
            services.role_grant_approval_record,
            request=grant,
            approver=carol.user,
            document=carol.sign(payload),
        )
        assert error.message == (
            "a signed approval is {payload, key_id, alg, signature}: decision is not recognised"
        )

    def test_the_person_granted_cannot_sign_their_own_grant(self, council):
        sam = enrol("sam")  # admin and council
        grace = person("grace")
        services.user_roles_change(actor=grace, user=sam.user, roles=["council"], reason="x")
        grant = services.user_roles_change(
            actor=grace,
            user=User.objects.get(pk=sam.user.pk),
            roles=["council", "admin"],
            reason="back",
        ).grant
        error = _refused(
            codes.APPROVAL_SELF,
            services.role_grant_approval_record,
            request=grant,
            approver=sam.user,
            document=_grant_signature(sam, grant),
        )
        assert error.message == "sam cannot sign the grant of roles to themself"

    def test_a_second_open_grant_for_the_same_person_is_refused(self, council):
        bob, nina = person("bob"), _user("nina")
        first = services.user_roles_change(actor=bob, user=nina, roles=["council"], reason="a")
        error = _refused(
            codes.REQUEST_PENDING,
            services.user_roles_change,
            actor=bob,
            user=nina,
            roles=["admin"],
            reason="b",
        )
        assert error.message == f"request {first.grant.id} to grant nina council is still open"


class TestApprovalsCountOnlyInRolesTheLedgerRecords:
    def test_two_admins_who_gave_themselves_council_by_group_cannot_approve_as_council(self):
        signers = {name: enrol(name) for name in ("bob", "grace")}
        council = Group.objects.get_or_create(name="council")[0]
        for signer in signers.values():
            signer.user.groups.add(council)  # edited directly: no ledger event
        request = filed_request(by="alice")
        for signer in signers.values():
            error = _refused(
                codes.APPROVAL_ROLE,
                services.approval_record,
                request=request,
                approver=User.objects.get(pk=signer.user.pk),
                document=approve(signer, request, role=signing.ROLE_COUNCIL),
            )
            assert error.message == (
                f"{signer.user.username} signed as council but does not hold the council role"
            )

    def test_a_council_member_granted_after_the_request_was_filed_does_not_count(self):
        signers = {name: enrol(name) for name in ("carol", "dave", "frank")}
        frank = signers["frank"]  # a viewer with a confirmed key
        request = filed_request(by="alice")
        grant = services.user_roles_change(
            actor=person("bob"), user=frank.user, roles=["viewer", "council"], reason="elected"
        ).grant
        for name in ("carol", "dave"):
            services.role_grant_approval_record(
                request=grant,
                approver=signers[name].user,
                document=_grant_signature(signers[name], grant),
            )
        frank_now = User.objects.get(pk=frank.user.pk)
        assert membership.roles_held(frank_now) == {"viewer", "council"}
        error = _refused(
            codes.APPROVAL_ROLE,
            services.approval_record,
            request=request,
            approver=frank_now,
            document=approve(frank, request, role=signing.ROLE_COUNCIL),
        )
        assert error.message == (
            "frank signed as council but, per the ledger, did not hold the council role before "
            f"request {request.id} was filed (seq {request.request_event_id})"
        )


class TestInstallation:
    def test_it_records_the_first_admins_and_council_as_the_first_role_events(self):
        ada, cy, bo = _user("ada"), _user("cy"), _user("bo")
        events = services.roles_install(admins=[ada, bo], council=[cy, bo])
        assert [(e.type, e.actor_id, e.actor_label) for e in events] == [
            (codes.ROLES_INSTALLED, None, "system:installation")
        ] * 3
        assert [e.payload for e in events] == [
            {
                "user_id": ada.pk,
                "username": "ada",
                "roles_before": [],
                "roles_after": ["admin"],
                "acting_as": "system",
            },
            {
                "user_id": bo.pk,
                "username": "bo",
                "roles_before": [],
                "roles_after": ["admin", "council"],
                "acting_as": "system",
            },
            {
                "user_id": cy.pk,
                "username": "cy",
                "roles_before": [],
                "roles_after": ["council"],
                "acting_as": "system",
            },
        ]
        assert membership.roles_held(User.objects.get(pk=bo.pk)) == {"admin", "council"}

    def test_it_refuses_a_second_installation(self):
        ada, cy = _user("ada"), _user("cy")
        first = services.roles_install(admins=[ada], council=[cy])[0]
        error = _refused(
            codes.ROLES_ALREADY_INSTALLED,
            services.roles_install,
            admins=[_user("eve")],
            council=[_user("zed")],
        )
        assert error.message == (
            f"the ledger already records roles (seq {first.seq}): grant roles on the Users page "
            "instead"
        )


def test_an_admin_granted_after_the_request_was_filed_does_not_count_as_its_admin():
    signers = {name: enrol(name) for name in ("grace", "carol", "dave", "erin")}
    request = filed_request(by="alice")
    newcomer = signers["carol"]  # council now; made admin after the request was filed
    grant = services.user_roles_change(
        actor=signers["grace"].user, user=newcomer.user, roles=["council", "admin"], reason="x"
    ).grant
    for name in ("dave", "erin"):
        voter = signers[name]
        services.role_grant_approval_record(
            request=grant, approver=voter.user, document=_grant_signature(voter, grant)
        )
    carol_now = User.objects.get(pk=newcomer.user.pk)
    assert membership.roles_held(carol_now) == {"council", "admin"}
    error = _refused(
        codes.APPROVAL_ROLE,
        services.approval_record,
        request=request,
        approver=carol_now,
        document=approve(newcomer, request, role=signing.ROLE_ADMIN),
    )
    assert error.message.startswith("carol signed as admin but, per the ledger, did not hold")
