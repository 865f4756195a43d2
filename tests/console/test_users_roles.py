"""The Users page and the users API change roles through the ledger: refused for oneself, a
signed event otherwise, and a grant of admin or council waits for a council quorum."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import User

from core.canonical import jcs
from core.ledger import codes
from core.ledger.signing import sign
from governance import membership
from governance import services as gov_services
from governance.models import GovernanceEvent, RoleGrantRequest
from tests.console.personas import persona

pytestmark = pytest.mark.django_db

NOT_ADMINS = ["vera", "alice", "oscar", "cora", "lena", "nora"]


def held(user: User) -> frozenset[str]:
    return membership.roles_held(User.objects.get(pk=user.pk))


def last_event() -> GovernanceEvent:
    return GovernanceEvent.objects.order_by("-seq").first()


class TestUsersPage:
    def test_adam_gives_vera_the_auditor_role_with_a_signed_event(self, as_persona):
        vera, adam = persona("vera"), persona("adam")
        response = as_persona("adam").post(
            "/governance/users/",
            {"user_id": vera.pk, "roles": ["viewer", "auditor"], "reason": "joined audit"},
        )
        assert response.status_code == 303
        event = last_event()
        assert (event.type, event.actor_id) == (codes.ROLES_CHANGED, adam.pk)
        assert event.payload == {
            "user_id": vera.pk,
            "username": "vera",
            "roles_before": ["viewer"],
            "roles_after": ["auditor", "viewer"],
            "reason": "joined audit",
        }
        assert held(vera) == {"viewer", "auditor"}

    @pytest.mark.parametrize("wanted", [["admin"], ["admin", "council"], []])
    def test_it_refuses_adam_changing_his_own_roles(self, as_persona, wanted):
        adam = persona("adam")
        client = as_persona("adam")
        before = GovernanceEvent.objects.count()
        response = client.post("/governance/users/", {"user_id": adam.pk, "roles": wanted})
        assert response.status_code == 403
        body = response.content.decode()
        message = "adam cannot change their own roles: ask another admin"
        assert f"ROLE_SELF</code> {html.escape(message)}" in body
        assert GovernanceEvent.objects.count() == before
        assert held(adam) == {"admin"}

    def test_granting_council_goes_to_the_council_and_changes_nothing_yet(self, as_persona):
        alice = persona("alice")
        response = as_persona("adam").post(
            "/governance/users/",
            {"user_id": alice.pk, "roles": ["auditor", "council"], "reason": "elected"},
        )
        assert response.status_code == 303
        grant = RoleGrantRequest.objects.get()
        assert (grant.user, grant.roles, grant.state) == (alice, ["council"], "pending")
        assert last_event().type == codes.ROLE_GRANT_REQUEST
        assert held(alice) == {"auditor"}
        page = as_persona("adam").get("/governance/users/").content.decode()
        assert f'href="/requests/role-grant/{grant.id}/"' in page

    def test_a_grant_without_a_reason_is_refused_with_its_code(self, as_persona):
        alice = persona("alice")
        response = as_persona("adam").post(
            "/governance/users/", {"user_id": alice.pk, "roles": ["admin"]}
        )
        assert response.status_code == 400
        assert "REQUEST_INVALID</code> a grant of admin or council needs a reason" in (
            response.content.decode()
        )
        assert not RoleGrantRequest.objects.exists()

    def test_an_unknown_role_is_refused_with_its_code(self, as_persona):
        vera = persona("vera")
        response = as_persona("adam").post(
            "/governance/users/", {"user_id": vera.pk, "roles": ["root"]}
        )
        assert response.status_code == 400
        assert "ROLE_UNKNOWN</code>" in response.content.decode()
        assert held(vera) == {"viewer"}

    @pytest.mark.parametrize("name", NOT_ADMINS)
    def test_only_admins_change_roles(self, as_persona, name):
        vera = persona("vera")
        response = as_persona(name).post(
            "/governance/users/", {"user_id": vera.pk, "roles": ["admin"]}
        )
        assert response.status_code == 403
        assert held(vera) == {"viewer"}

    def test_the_council_signs_a_grant_on_its_page(self, as_persona, member_key):
        alice = persona("alice")
        grant = gov_services.user_roles_change(
            actor=persona("adam"), user=alice, roles=["auditor", "admin"], reason="ops lead"
        ).grant
        page = as_persona("cora").get(f"/requests/role-grant/{grant.id}/").content.decode()
        payload = gov_services.role_grant_payload_for(request=grant, decision="approve")
        assert html.escape(jcs(payload).decode()) in page
        for name in ("cora", "colin"):
            key, private = member_key(name)
            text = jcs(payload).decode()
            response = as_persona(name).post(
                f"/governance/role-grants/{grant.id}/",
                {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
            )
            assert response.status_code == 303, response.content.decode()[:3000]
        grant.refresh_from_db()
        assert grant.state == "approved"
        assert held(alice) == {"auditor", "admin"}


class TestUsersApi:
    def test_adam_sets_veras_roles(self, as_persona):
        vera = persona("vera")
        response = as_persona("adam").post(
            f"/api/users/{vera.pk}/roles/",
            {"roles": ["viewer", "legal"], "reason": "dsr duty"},
            content_type="application/json",
        )
        assert response.status_code == 200
        body = response.json()
        assert body["user"] == {
            "id": vera.pk,
            "username": "vera",
            "is_active": True,
            "roles": ["legal", "viewer"],
        }
        assert body["grant"] is None
        event = GovernanceEvent.objects.get(seq=body["event_seq"])
        assert (event.type, event.actor_label) == (codes.ROLES_CHANGED, "adam")

    def test_it_refuses_changing_ones_own_roles(self, as_persona):
        sam = persona("sam")
        response = as_persona("sam").post(
            f"/api/users/{sam.pk}/roles/",
            {"roles": ["auditor", "admin", "council"], "reason": "me"},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert response.json() == {
            "error_code": "ROLE_SELF",
            "message": "sam cannot change their own roles: ask another admin",
        }
        assert held(sam) == {"auditor", "admin"}

    @pytest.mark.parametrize("name", NOT_ADMINS)
    def test_only_admins_change_roles(self, as_persona, name):
        vera = persona("vera")
        response = as_persona(name).post(
            f"/api/users/{vera.pk}/roles/", {"roles": []}, content_type="application/json"
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"
        assert held(vera) == {"viewer"}

    def test_an_unverified_admin_session_changes_nothing(self, as_persona):
        from django.test import Client

        from tests.console.personas import sign_in

        vera = persona("vera")
        client = sign_in(Client(), persona("adam"), verified=False)
        response = client.post(
            f"/api/users/{vera.pk}/roles/", {"roles": []}, content_type="application/json"
        )
        assert response.status_code == 403

    @pytest.mark.parametrize("strong", ["council", "admin"])
    def test_a_strong_grant_takes_effect_on_the_quorums_signatures(
        self, as_persona, member_key, strong
    ):
        lena = persona("lena")
        response = as_persona("adam").post(
            f"/api/users/{lena.pk}/roles/",
            {"roles": ["legal", strong], "reason": "elected"},
            content_type="application/json",
        )
        assert response.status_code == 200
        grant = response.json()["grant"]
        assert (grant["roles"], grant["state"], grant["requested_by"]) == (
            [strong],
            "pending",
            "adam",
        )
        assert grant["remaining"] == "2 council approval(s)"
        assert held(lena) == {"legal"}
        for name in ("cora", "colin"):
            detail = as_persona(name).get(f"/api/role-grants/{grant['id']}/").json()
            key, private = member_key(name)
            signed = as_persona(name).post(
                f"/api/role-grants/{grant['id']}/approvals/",
                {
                    "payload": detail["payload"],
                    "key_id": key.key_id,
                    "signature": sign(private, detail["payload_jcs"].encode()),
                },
                content_type="application/json",
            )
            assert signed.status_code == 201, signed.json()
            if name == "cora":
                assert held(lena) == {"legal"}  # one signature is not a quorum
        assert held(lena) == {"legal", strong}
        assert last_event().type == codes.ROLE_GRANT_APPROVED

    def test_an_admin_cannot_sign_a_grant(self, as_persona, member_key):
        lena = persona("lena")
        grant = gov_services.user_roles_change(
            actor=persona("sam"), user=lena, roles=["admin"], reason="x"
        ).grant
        key, private = member_key("adam")
        payload = gov_services.role_grant_payload_for(request=grant, decision="approve")
        response = as_persona("adam").post(
            f"/api/role-grants/{grant.id}/approvals/",
            {"payload": payload, "key_id": key.key_id, "signature": sign(private, jcs(payload))},
            content_type="application/json",
        )
        assert response.status_code == 403
        assert response.json()["error_code"] == "PERMISSION_DENIED"

    def test_the_list_is_for_admins_and_the_council(self, as_persona):
        assert as_persona("adam").get("/api/role-grants/").status_code == 200
        assert as_persona("cora").get("/api/role-grants/").status_code == 200
        assert as_persona("alice").get("/api/role-grants/").status_code == 403
        assert as_persona("alice").get("/api/users/").status_code == 403
        users = as_persona("adam").get("/api/users/").json()
        assert {
            "id": persona("adam").pk,
            "username": "adam",
            "is_active": True,
            "roles": ["admin"],
        } in users
