"""Commands that act for a person apply the same roles matrix as the pages and the API, with
the person's roles as the ledger records them; without --user a command acts as the system
and the ledger says so."""

from __future__ import annotations

import io
import uuid

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from core.ledger import codes
from governance import membership, services
from governance.models import ForceContinueRequest, GovernanceEvent
from replay.models import ReplayRun
from tests.governance.factories import diverged_run, person

pytestmark = pytest.mark.django_db


def manage(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


class TestRequestContinue:
    def test_it_refuses_a_viewer_filing_a_force_continue_request(self):
        run = diverged_run()
        person("frank")
        before = GovernanceEvent.objects.count()
        code, out, err = manage(
            "governance", "request-continue", str(run.id), "--user", "frank", "--reason", "r"
        )
        assert (code, out) == (1, "")
        assert err.strip() == (
            "REQUEST_ROLE: frank may not force continue request: their roles per the ledger "
            "(viewer) do not allow it"
        )
        assert GovernanceEvent.objects.count() == before
        assert not ForceContinueRequest.objects.exists()

    def test_an_auditor_files_one(self):
        run = diverged_run()
        person("alice")
        code, _, err = manage(
            "governance", "request-continue", str(run.id), "--user", "alice", "--reason", "r"
        )
        assert (code, err) == (0, "")
        assert ForceContinueRequest.objects.get().requested_by.username == "alice"


@pytest.mark.usefixtures("stored_traces")
class TestReplayCommand:
    @pytest.fixture
    def trace(self):
        from tests.governance.conftest import ingest

        return ingest("ok")

    def test_it_refuses_a_production_replay_to_an_auditor_alone(self, trace):
        person("alice")
        before = GovernanceEvent.objects.count()
        code, out, err = manage(
            "replay", trace.trace_id, "--mode", "production", "--user", "alice", "--json"
        )
        assert (code, out) == (1, "")
        assert err.strip() == (
            "REQUEST_ROLE: alice may not replay production: their roles per the ledger "
            "(auditor) do not allow it"
        )
        assert GovernanceEvent.objects.count() == before
        assert not ReplayRun.objects.exists()

    def test_an_auditor_and_admin_runs_a_production_replay(self, trace):
        sam = person("sam")
        services.user_roles_change(actor=person("bob"), user=sam, roles=["admin", "auditor"])
        code, _, err = manage(
            "replay", trace.trace_id, "--mode", "production", "--user", "sam", "--json"
        )
        assert (code, err) == (0, "")
        run = ReplayRun.objects.get()
        assert (run.mode, run.requested_by.username) == ("production", "sam")
        request = GovernanceEvent.objects.get(type=codes.REPLAY_REQUEST)
        assert (request.actor_id, request.actor_label) == (sam.pk, "sam")

    def test_a_group_edited_outside_the_ledger_does_not_count_on_the_command_line(self, trace):
        from django.contrib.auth.models import Group

        alice = person("alice")
        alice.groups.add(Group.objects.get_or_create(name="admin")[0])
        code, _, err = manage("replay", trace.trace_id, "--mode", "production", "--user", "alice")
        assert code == 1
        assert err.startswith("REQUEST_ROLE: alice may not replay production")

    def test_it_refuses_a_viewer_even_an_audit_replay(self, trace):
        person("frank")
        code, _, err = manage("replay", trace.trace_id, "--user", "frank")
        assert code == 1
        assert err.strip() == (
            "REQUEST_ROLE: frank may not replay audit: their roles per the ledger (viewer) do "
            "not allow it"
        )

    def test_without_user_it_acts_as_the_system_and_the_ledger_says_so(self, trace):
        code, _, err = manage("replay", trace.trace_id, "--mode", "production", "--json")
        assert (code, err) == (0, "")
        request = GovernanceEvent.objects.get(type=codes.REPLAY_REQUEST)
        assert (request.actor_id, request.actor_label) == (None, "system:cli")
        assert request.payload["acting_as"] == "system"


class TestRolesInstallCommand:
    def test_it_records_the_first_admins_and_council_members(self):
        for name in ("ada", "cy", "dee"):
            User.objects.create_user(name)
        code, out, err = manage(
            "governance", "install-roles", "--admin", "ada", "--council", "cy", "--council", "dee"
        )
        assert (code, err) == (0, "")
        assert out.splitlines() == [
            "ada: admin (seq 2)",
            "cy: council (seq 3)",
            "dee: council (seq 4)",
        ]
        installed = GovernanceEvent.objects.filter(type=codes.ROLES_INSTALLED)
        assert [e.actor_label for e in installed] == ["system:installation"] * 3
        assert membership.roles_held(User.objects.get(username="cy")) == {"council"}

    def test_a_second_installation_exits_1_with_its_code(self):
        for name in ("ada", "cy"):
            User.objects.create_user(name)
        assert manage("governance", "install-roles", "--admin", "ada", "--council", "cy")[0] == 0
        code, _, err = manage("governance", "install-roles", "--admin", "cy", "--council", "ada")
        assert code == 1
        assert err.startswith("ROLES_ALREADY_INSTALLED: the ledger already records roles (seq 2)")


class TestRolesCommand:
    def test_an_admin_sets_roles_from_the_command_line_and_never_their_own(self):
        person("bob")
        User.objects.create_user("nina")
        code, out, err = manage(
            "governance", "set-roles", "nina", "viewer", "auditor", "--user", "bob"
        )
        assert (code, err) == (0, "")
        assert out.strip() == "nina: auditor, viewer"
        code, _, err = manage("governance", "set-roles", "bob", "council", "--user", "bob")
        assert code == 1
        assert err.strip() == "ROLE_SELF: bob cannot change their own roles: ask another admin"


def test_a_council_grant_is_asked_signed_offline_and_recorded_from_the_command_line(
    tmp_path, settings
):
    settings.GOVERNANCE_COUNCIL_QUORUM = 1
    for name in ("carol", "grace", "bob"):
        person(name)
    User.objects.create_user("nina")
    key_file = tmp_path / "carol.pem"
    assert manage("governance", "keygen", "--out", str(key_file))[0] == 0
    code, key_id, _ = manage(
        "governance", "register-key", "--user", "carol", "--public-key", str(key_file)
    )
    assert code == 0
    assert manage("governance", "confirm-key", key_id.strip(), "--admin", "grace")[0] == 0
    code, out, err = manage(
        "governance", "set-roles", "nina", "council", "--user", "bob", "--reason", "elected"
    )
    assert (code, err) == (0, "")
    grant = services.selectors.role_grants().get()
    assert (
        out.strip() == f"nina: no roles; grant of council awaits the council (request {grant.id})"
    )
    signed = tmp_path / "signed.json"
    code, _, _ = manage(
        "governance",
        "sign",
        "--key",
        str(key_file),
        "--role-grant",
        str(grant.id),
        "--out",
        str(signed),
    )
    assert code == 0
    code, out, err = manage("governance", "record-approval", str(signed), "--user", "carol")
    assert (code, err) == (0, "")
    assert out.strip() == f"recorded approve by carol; role grant {grant.id} is approved"
    assert membership.roles_held(User.objects.get(username="nina")) == {"council"}


def test_a_viewer_cannot_register_a_signing_key_from_the_command_line(tmp_path):
    person("frank")
    key_file = tmp_path / "frank.pem"
    assert manage("governance", "keygen", "--out", str(key_file))[0] == 0
    code, _, err = manage(
        "governance", "register-key", "--user", "frank", "--public-key", str(key_file)
    )
    assert code == 1
    assert err.strip() == (
        "REQUEST_ROLE: frank may not signing key register: their roles per the ledger "
        "(viewer) do not allow it"
    )


def test_an_upgrade_records_the_role_groups_as_they_are_once():
    from django.contrib.auth.models import Group

    for name, groups in {"ada": ["admin"], "cy": ["council"], "vic": ["viewer", "auditor"]}.items():
        user = User.objects.create_user(name)
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
    User.objects.create_user("nobody")
    code, out, err = manage("governance", "install-roles", "--from-groups")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ada: admin (seq 2)",
        "cy: council (seq 3)",
        "vic: auditor, viewer (seq 4)",
    ]
    assert membership.roles_held(User.objects.get(username="vic")) == {"auditor", "viewer"}
    code, _, err = manage("governance", "install-roles", "--from-groups")
    assert code == 1
    assert err.startswith("ROLES_ALREADY_INSTALLED:")


def test_it_refuses_a_viewer_resuming_a_diverged_replay():
    run = diverged_run()
    person("frank")
    before = GovernanceEvent.objects.count()
    code, _, err = manage("replay", run.trace.trace_id, "--resume", str(run.id), "--user", "frank")
    assert code == 1
    assert err.strip() == (
        "REQUEST_ROLE: frank may not replay audit: their roles per the ledger (viewer) do not "
        "allow it"
    )
    assert GovernanceEvent.objects.count() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("governance", "set-roles", "nobody", "--user", "grace"), "no user named 'nobody'"),
        (("replay", "nope", "--user", "nobody"), "no user named 'nobody'"),
        (
            ("governance", "request-continue", "nope", "--user", "alice", "--reason", "r"),
            "no replay run nope",
        ),
        (
            (
                "governance",
                "request-continue",
                str(uuid.UUID(int=0)),
                "--user",
                "alice",
                "--reason",
                "r",
            ),
            f"no replay run {uuid.UUID(int=0)}",
        ),
    ],
    ids=["set-roles", "replay", "run-not-an-id", "run"],
)
def test_an_unknown_name_is_a_usage_error_exiting_2(args, message):
    with pytest.raises(CommandError) as refused:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())
    assert (str(refused.value), refused.value.returncode) == (message, 2)
