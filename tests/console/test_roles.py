"""The roles matrix of ARCHITECTURE.md, restated here row by row, against console.roles."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.test import Client

from console import roles
from tests.console.factories import trace_row
from tests.console.personas import make_user, sign_in

pytestmark = pytest.mark.django_db

V, AU, OP, AD, CO, LE = "viewer", "auditor", "operator", "admin", "council", "legal"

# action -> the single roles that may do it (ARCHITECTURE.md, "Roles")
EXPECTED = {
    roles.BROWSE: {V, AU, OP, AD, CO, LE},
    roles.UPLOAD: {AU, OP, AD},
    roles.REPLAY_AUDIT: {AU, OP, AD},
    roles.REPLAY_PRODUCTION: set(),
    roles.REPLAY_PRODUCTION_REQUEST: {AU, AD},
    roles.REPLAY_PRODUCTION_APPROVE: {CO},
    roles.FORCE_CONTINUE_REQUEST: {AU, AD},
    roles.FORCE_CONTINUE_APPROVE_ADMIN: {AD},
    roles.FORCE_CONTINUE_APPROVE_COUNCIL: {CO},
    roles.HALT_CLEAR: {CO},
    roles.INCIDENT_DECLARE: {AD},
    roles.DSR: {AD, LE},
    roles.DSR_APPROVE: {AD, CO},
    roles.PII_REVEAL: {AD},
    roles.MANAGE: {AD},
    roles.ROLE_GRANT_APPROVE: {CO},
    roles.SIGNING_KEY_REGISTER: {AD, CO},
    roles.API_TOKENS_OWN: {V, AU, OP, AD, CO, LE},
    roles.LEDGER_VERIFY_FULL: {AD},
    roles.INBOX: {V, AU, OP, AD, CO, LE},
    roles.TRACE_NOTE_ADD: {AU, AD},
}


def verified(user):
    """The user as OTPMiddleware leaves it after a correct code."""
    user.is_verified = lambda: True
    return user


def test_every_action_has_an_expected_row():
    assert set(EXPECTED) == set(roles.ACTIONS) == set(roles.MATRIX)


@pytest.mark.parametrize("role", [V, AU, OP, AD, CO, LE])
@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_each_single_role_may_do_exactly_its_actions(role, action):
    user = verified(make_user(f"u-{role}", role))
    assert roles.can(user, action) is (role in EXPECTED[action])


def test_it_grants_production_replay_to_auditor_and_admin_together():
    sam = verified(make_user("sam", AU, AD))
    assert roles.can(sam, roles.REPLAY_PRODUCTION)
    assert roles.replay_modes_for(sam) == ["audit", "sandbox", "production"]


@pytest.mark.parametrize("pair", [(AU, OP), (AD, CO), (AU, LE), (OP, AD, CO)])
def test_it_refuses_production_replay_to_other_combinations(pair):
    user = verified(make_user("combo", *pair))
    assert not roles.can(user, roles.REPLAY_PRODUCTION)


@pytest.mark.parametrize(("role", "may_ask"), [(AU, True), (AD, True), (OP, False), (CO, False)])
def test_one_of_auditor_or_admin_asks_the_council_instead_of_choosing_production(role, may_ask):
    user = verified(make_user("one", role))
    assert "production" not in roles.replay_modes_for(user)
    assert roles.can(user, roles.REPLAY_PRODUCTION_REQUEST) is may_ask


def test_it_offers_no_mode_to_a_viewer():
    assert roles.replay_modes_for(verified(make_user("v", V))) == []


@pytest.mark.parametrize("role", [AD, CO])
def test_strong_roles_are_inert_until_the_second_factor(role):
    user = make_user("strong", role, AU)
    user.is_verified = lambda: False
    assert roles.roles(user) == {AU}
    assert roles.needs_second_factor(user)
    assert not roles.can(user, roles.MANAGE if role == AD else roles.HALT_CLEAR)
    user.is_verified = lambda: True
    assert roles.roles(user) == {AU, role}
    assert not roles.needs_second_factor(user)


def test_a_user_without_otp_middleware_counts_as_unverified():
    adam = make_user("adam", AD)  # e.g. a token-authenticated API client
    assert roles.roles(adam) == set()
    assert roles.held_roles(adam) == {AD}


def test_superuser_and_staff_flags_grant_nothing():
    root = make_user("root")
    root.is_superuser = root.is_staff = True
    root.save()
    assert not any(roles.can(verified(root), action) for action in roles.ACTIONS)


def test_inactive_and_anonymous_users_hold_no_role():
    gone = make_user("gone", AD, AU)
    gone.is_active = False
    assert roles.held_roles(gone) == frozenset()
    assert roles.held_roles(AnonymousUser()) == frozenset()


def test_groups_outside_the_matrix_are_ignored():
    from django.contrib.auth.models import Group

    user = make_user("odd")
    user.groups.add(Group.objects.create(name="superadmins"))
    assert roles.held_roles(user) == frozenset()


def test_it_rejects_an_unknown_action():
    with pytest.raises(ValueError, match="unknown action 'fly'"):
        roles.can(make_user("x", V), "fly")


def test_roles_are_read_once_per_user_object():
    from governance.services import user_roles_change

    alice = make_user("alice", V)
    assert roles.held_roles(alice) == {V}
    again = type(alice).objects.get(pk=alice.pk)
    user_roles_change(actor=make_user("adam", AD), user=again, roles={V, AU})
    assert roles.held_roles(alice) == {V}  # this request's object keeps what it read
    assert roles.held_roles(type(alice).objects.get(pk=alice.pk)) == {V, AU}


def test_it_ignores_a_role_group_edited_outside_the_ledger():
    from django.contrib.auth.models import Group

    alice = make_user("alice", V)
    alice.groups.add(Group.objects.get_or_create(name=AD)[0])
    alice = verified(type(alice).objects.get(pk=alice.pk))
    assert roles.held_roles(alice) == {V}
    assert not roles.can(alice, roles.MANAGE)


class TestAccessTraceById:
    def test_it_returns_the_trace_to_a_user_with_the_role(self):
        trace = trace_row()
        assert roles.access_trace_by_id(make_user("vera", V), trace.trace_id) == trace

    def test_it_gives_404_for_a_missing_trace_to_a_user_with_the_role(self):
        with pytest.raises(Http404):
            roles.access_trace_by_id(make_user("vera", V), "0" * 32)

    def test_it_gives_the_same_403_for_existing_and_missing_traces_without_the_role(self):
        nora = make_user("nora")
        trace = trace_row()
        with pytest.raises(PermissionDenied) as existing:
            roles.access_trace_by_id(nora, trace.trace_id)
        with pytest.raises(PermissionDenied) as missing:
            roles.access_trace_by_id(nora, "0" * 32)
        assert str(existing.value) == str(missing.value) == "your roles do not allow browse"

    def test_it_checks_the_action_asked_for(self):
        trace = trace_row()
        with pytest.raises(PermissionDenied, match="your roles do not allow upload"):
            roles.access_trace_by_id(make_user("vera", V), trace.trace_id, roles.UPLOAD)


class TestAccessRunById:
    def test_it_gives_404_for_a_malformed_or_unknown_run_id(self):
        vera = make_user("vera", V)
        for run_id in ["not-a-uuid", "7b0b7a0e-0000-4000-8000-000000000000"]:
            with pytest.raises(Http404):
                roles.access_run_by_id(vera, run_id)

    def test_it_gives_403_before_looking_up_without_the_role(self):
        with pytest.raises(PermissionDenied):
            roles.access_run_by_id(make_user("nora"), "not-a-uuid")


def test_navigation_shows_only_what_the_roles_allow(client: Client):
    sign_in(client, make_user("vera", V))
    page = client.get("/traces/").content.decode()
    assert "vera" in page
    assert "viewer" in page
