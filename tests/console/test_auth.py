"""Sign-in, its throttle, sign-out, and the TOTP second factor for admin and council."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from console import signin
from console.models import EncryptedTOTPDevice
from console.views import auth
from tests.console.personas import PASSWORD, current_code, make_user, persona, sign_in

pytestmark = pytest.mark.django_db


LOCKED_10_MINUTES = (
    "Too many failed sign-in attempts for this account from your address. "
    "Try again in 10 minute(s)."
)
LOCKED_SECOND_FACTOR = (
    "If you have an authenticator, you may sign in now with your password and its current code."
)
BACKOFF_5_SECONDS = "Too many failed sign-in attempts. Wait 5 seconds before the next try."


def failures(*, username: str, ip: str | None = None) -> int:
    """Failed sign-ins the throttle holds, for a username (and an address)."""
    rows = AccessAttempt.objects.filter(username=username)
    if ip is not None:
        rows = rows.filter(ip_address=ip)
    return sum(rows.values_list("failures_since_start", flat=True))


def failure_keys(field: str) -> set[str]:
    """The usernames (``"username"``) or addresses (``"ip"``) the throttle counts under."""
    column = {"username": "username", "ip": "ip_address"}[field]
    return set(AccessAttempt.objects.values_list(column, flat=True))


def age_failures(seconds: int) -> None:
    """Every recorded failure happened ``seconds`` ago."""
    from datetime import timedelta

    from django.utils import timezone

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(seconds=seconds))


def login(client: Client, username: str, password: str = PASSWORD, ip: str = "10.0.0.1", **data):
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password, **data},
        REMOTE_ADDR=ip,
    )


class TestSignIn:
    def test_it_signs_alice_in_and_lands_on_the_trace_list(self, client):
        persona("alice")
        response = login(client, "alice")
        assert response.status_code == 302
        assert response["Location"] == "/traces/"
        assert client.get("/traces/").status_code == 200

    def test_it_follows_a_safe_next_and_ignores_a_foreign_one(self, client):
        persona("alice")
        assert login(client, "alice", next="/traces/?verdict=ok")["Location"] == (
            "/traces/?verdict=ok"
        )
        client.logout()
        assert login(client, "alice", next="https://evil.example/")["Location"] == "/traces/"

    def test_it_refuses_a_wrong_password_and_records_the_failure(self, client):
        persona("alice")
        response = login(client, "alice", "wrong")
        assert response.status_code == 200
        assert "Please enter a correct username and password" in response.content.decode()
        assert failures(username="alice", ip="10.0.0.1") == 1

    def test_the_page_redirects_anonymous_visitors_to_sign_in(self, client):
        response = client.get("/traces/")
        assert response.status_code == 302
        assert response["Location"] == "/accounts/login/?next=/traces/"

    def test_an_htmx_request_of_an_anonymous_visitor_redirects_the_client(self, client):
        response = client.get("/traces/", HTTP_HX_REQUEST="true")
        assert response["HX-Redirect"] == "/accounts/login/?next=%2Ftraces%2F"

    def test_sign_out_is_a_post(self, client):
        sign_in(client, persona("alice"))
        assert client.get("/accounts/logout/").status_code == 405
        assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"
        assert client.get("/traces/").status_code == 302


class TestThrottle:
    @pytest.fixture(autouse=True)
    def _limits(self, settings):
        settings.LOGIN_THROTTLE_FAILURES = 3
        settings.LOGIN_THROTTLE_WINDOW_SECONDS = 600

    def test_it_locks_the_pair_after_too_many_failures_even_with_the_right_password(self, client):
        persona("alice")
        for _ in range(3):
            assert login(client, "alice", "wrong").status_code == 200
        response = login(client, "alice")
        assert response.status_code == 429
        assert LOCKED_10_MINUTES in response.content.decode()
        assert "_auth_user_id" not in client.session

    def test_a_locked_pair_gets_the_same_answer_whatever_the_password(self, client):
        persona("alice")
        for _ in range(3):
            login(client, "alice", "wrong")
        right = login(client, "alice")
        wrong = login(client, "alice", "wrong-again")
        assert right.status_code == wrong.status_code == 429
        assert LOCKED_10_MINUTES in right.content.decode()
        assert LOCKED_10_MINUTES in wrong.content.decode()
        assert failures(username="alice") == 3  # a password alone is not even checked

    def test_what_the_throttle_keeps_of_a_try_holds_no_secret(self, client):
        persona("cora")
        for _ in range(3):
            login(client, "cora", "wrong")
        age_failures(6)  # past the backoff: the try with a code is checked and counted
        assert login(client, "cora", "s3cret-guess", token="654321").status_code == 429
        assert failures(username="cora") == 4
        kept = "\n".join(AccessAttempt.objects.values_list("post_data", flat=True))
        assert "password=********************" in kept
        for secret in ("wrong", "s3cret-guess", "654321", "cora"):
            assert secret not in kept

    def test_it_names_the_minutes_left(self):
        assert signin.locked_message(61) == (
            "Too many failed sign-in attempts for this account from your address. "
            "Try again in 2 minute(s)."
        )

    def test_it_keys_on_username_and_address_together(self, client):
        persona("alice")
        for _ in range(3):
            login(client, "alice", "wrong", ip="10.0.0.1")
        assert login(client, "alice", ip="10.0.0.2").status_code == 302  # another address
        client.logout()
        assert login(client, "ALICE", "wrong", ip="10.0.0.1").status_code == 429  # same name

    def test_a_success_clears_the_failures(self, client):
        persona("alice")
        for _ in range(2):
            login(client, "alice", "wrong")
        assert login(client, "alice").status_code == 302
        assert failures(username="alice") == 0

    def test_failures_older_than_the_window_do_not_count(self, client):
        persona("alice")
        for _ in range(3):
            login(client, "alice", "wrong")
        assert login(client, "alice").status_code == 429
        age_failures(601)
        assert login(client, "alice").status_code == 302


class TestSecondFactor:
    def test_an_admin_without_a_device_is_sent_to_set_up(self, client):
        make_user("adam", "admin", device=False)
        login(client, "adam")
        response = client.get("/traces/")
        assert response.status_code == 302
        assert response["Location"] == "/accounts/2fa/setup/?next=%2Ftraces%2F"

    def test_a_council_member_with_a_device_is_sent_to_verify(self, client):
        persona("cora")
        login(client, "cora")
        response = client.get("/traces/?verdict=ok")
        assert response["Location"] == "/accounts/2fa/verify/?next=%2Ftraces%2F%3Fverdict%3Dok"

    def test_an_htmx_request_is_redirected_by_the_client(self, client):
        persona("cora")
        login(client, "cora")
        response = client.get("/traces/", HTTP_HX_REQUEST="true")
        assert response["HX-Redirect"] == "/accounts/2fa/verify/?next=%2Ftraces%2F"

    def test_a_viewer_never_meets_the_second_factor(self, client):
        persona("vera")
        login(client, "vera")
        assert client.get("/traces/").status_code == 200

    def test_the_right_code_verifies_the_session_and_wakes_the_strong_role(self, client):
        cora = persona("cora")
        login(client, "cora")
        response = client.post(
            "/accounts/2fa/verify/", {"token": current_code(cora), "next": "/traces/"}
        )
        assert response.status_code == 302
        assert response["Location"] == "/traces/"
        page = client.get("/traces/")
        assert page.status_code == 200
        assert "council" in page.content.decode()

    def test_a_wrong_code_is_refused_with_the_exact_message(self, client):
        persona("cora")
        login(client, "cora")
        response = client.post("/accounts/2fa/verify/", {"token": "000000"})
        assert response.status_code == 400
        assert auth.MESSAGE_BAD_CODE in response.content.decode()

    def test_it_refuses_a_code_already_used_and_says_to_wait_for_the_next(self, client):
        cora = persona("cora")
        login(client, "cora")
        code = current_code(cora)
        first = client.post("/accounts/2fa/verify/", {"token": code, "next": "/traces/"})
        assert first.status_code == 302
        second = Client()
        login(second, "cora", ip="10.0.0.2")
        response = second.post("/accounts/2fa/verify/", {"token": code})
        assert response.status_code == 400
        body = response.content.decode()
        assert auth.MESSAGE_CODE_USED == "This code was already used; wait for the next one."
        assert auth.MESSAGE_CODE_USED in body
        assert auth.MESSAGE_BAD_CODE not in body

    def test_repeated_wrong_codes_are_throttled_by_the_device(self, client):
        persona("cora")
        login(client, "cora")
        client.post("/accounts/2fa/verify/", {"token": "000000"})
        response = client.post("/accounts/2fa/verify/", {"token": "000000"})
        assert response.status_code == 429
        assert "Too many wrong codes. Wait" in response.content.decode()

    def test_set_up_shows_a_qr_code_as_svg_and_confirms_with_a_code(self, client):
        adam = make_user("adam", "admin", device=False)
        login(client, "adam")
        page = client.get("/accounts/2fa/setup/?next=/traces/")
        body = page.content.decode()
        assert page.status_code == 200
        assert "<svg" in body
        assert 'id="otp-secret"' in body
        device = TOTPDevice.objects.get(user=adam)
        assert not device.confirmed
        device.confirmed = True  # current_code reads confirmed devices only
        device.save()
        code = current_code(adam)
        device.confirmed = False
        device.save()
        response = client.post("/accounts/2fa/setup/", {"token": code, "next": "/traces/"})
        assert response["Location"] == "/traces/"
        device.refresh_from_db()
        assert device.confirmed
        assert client.get("/traces/").status_code == 200

    def test_set_up_refuses_a_second_device_with_only_a_password(self, client):
        persona("adam")
        login(client, "adam")
        response = client.get("/accounts/2fa/setup/")
        assert response.status_code == 409
        assert auth.MESSAGE_ALREADY_ENROLLED in response.content.decode()
        assert TOTPDevice.objects.filter(user__username="adam").count() == 1

    def test_verify_without_a_device_goes_to_set_up(self, client):
        make_user("adam", "admin", device=False)
        login(client, "adam")
        assert client.get("/accounts/2fa/verify/")["Location"].startswith("/accounts/2fa/setup/")


class TestThrottleKeys:
    """The throttle keys on the name the form signs in with and on the real client address."""

    @pytest.fixture(autouse=True)
    def _limits(self, settings):
        settings.LOGIN_THROTTLE_FAILURES = 3
        settings.LOGIN_THROTTLE_WINDOW_SECONDS = 600

    def test_it_refuses_a_look_alike_username_a_fresh_budget(self, client):
        persona("lena")
        for _ in range(3):
            login(client, "lena", "wrong")
        # FULLWIDTH LATIN SMALL LETTER L: NFKC makes it "lena", so the form signs in as lena
        response = login(client, "\uff4cena", "wrong")
        assert response.status_code == 429
        response = login(client, "\uff4cENA")
        assert response.status_code == 429
        assert failure_keys("username") == {"lena"}

    def test_the_key_is_the_nfkc_normalised_case_folded_name(self):
        assert signin.throttle_username(" \uff4c\uff25na ") == "lena"
        assert signin.throttle_username("Stra\u00dfe") == "strasse"

    def test_it_ignores_a_forwarded_header_when_no_proxy_is_trusted(self, client, settings):
        settings.REPLAY_TRUSTED_PROXIES = ""
        persona("alice")
        for n in range(3):
            client.post(
                "/accounts/login/",
                {"username": "alice", "password": "wrong"},
                REMOTE_ADDR="10.0.0.1",
                HTTP_X_FORWARDED_FOR=f"198.51.100.{n}",
            )
        response = client.post(
            "/accounts/login/",
            {"username": "alice", "password": PASSWORD},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR="198.51.100.99",
        )
        assert response.status_code == 429
        assert failure_keys("ip") == {"10.0.0.1"}

    def test_behind_a_trusted_proxy_one_client_cannot_lock_out_another(self, client, settings):
        settings.REPLAY_TRUSTED_PROXIES = "1"
        settings.REPLAY_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
        persona("alice")
        proxy = {"REMOTE_ADDR": "10.0.0.9"}
        for _ in range(3):
            client.post(
                "/accounts/login/",
                {"username": "alice", "password": "wrong"},
                HTTP_X_FORWARDED_FOR="203.0.113.5",
                **proxy,
            )
        assert failure_keys("ip") == {"203.0.113.5"}
        attacker = client.post(
            "/accounts/login/",
            {"username": "alice", "password": PASSWORD},
            HTTP_X_FORWARDED_FOR="203.0.113.5",
            **proxy,
        )
        assert attacker.status_code == 429
        owner = Client().post(
            "/accounts/login/",
            {"username": "alice", "password": PASSWORD},
            HTTP_X_FORWARDED_FOR="198.51.100.7",
            **proxy,
        )
        assert owner.status_code == 302


class TestClientAddress:
    @staticmethod
    def request(remote: str, forwarded: str | None = None, header: str = "HTTP_X_FORWARDED_FOR"):
        from django.test import RequestFactory

        extra = {header: forwarded} if forwarded is not None else {}
        return RequestFactory().get("/", REMOTE_ADDR=remote, **extra)

    def test_without_trusted_proxies_it_is_the_peer_address(self, settings):
        settings.REPLAY_TRUSTED_PROXIES = ""
        assert signin.client_ip(self.request("10.0.0.1", "1.2.3.4")) == "10.0.0.1"

    def test_a_count_takes_that_many_hops_from_the_right(self, settings):
        settings.REPLAY_TRUSTED_PROXIES = "2"
        settings.REPLAY_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
        # the client forged the first entry; two proxies appended the next two
        forwarded = "6.6.6.6, 203.0.113.5, 10.0.0.8"
        assert signin.client_ip(self.request("10.0.0.9", forwarded)) == "203.0.113.5"
        # fewer entries than trusted hops: nothing in the header can be trusted
        assert signin.client_ip(self.request("10.0.0.9", "203.0.113.5")) == "10.0.0.9"

    def test_networks_skip_trusted_hops_and_need_a_trusted_peer(self, settings):
        settings.REPLAY_TRUSTED_PROXIES = "10.0.0.0/8, 192.168.1.1"
        settings.REPLAY_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
        forwarded = "6.6.6.6, 203.0.113.5, 192.168.1.1, 10.1.2.3"
        assert signin.client_ip(self.request("10.0.0.9", forwarded)) == "203.0.113.5"
        # a peer outside the trusted networks is the client, whatever it forwards
        assert signin.client_ip(self.request("198.51.100.1", forwarded)) == "198.51.100.1"

    def test_it_reads_the_configured_header(self, settings):
        settings.REPLAY_TRUSTED_PROXIES = "1"
        settings.REPLAY_TRUSTED_PROXY_HEADER = "X-Real-IP"
        request = self.request("10.0.0.9", "203.0.113.5", header="HTTP_X_REAL_IP")
        assert signin.client_ip(request) == "203.0.113.5"

    def test_a_malformed_forwarded_address_falls_back_to_the_peer(self, settings):
        settings.REPLAY_TRUSTED_PROXIES = "1"
        settings.REPLAY_TRUSTED_PROXY_HEADER = "X-Forwarded-For"
        assert signin.client_ip(self.request("10.0.0.9", "not-an-ip")) == "10.0.0.9"

    def test_a_nonsense_trusted_proxies_setting_stops_the_console_from_starting(self):
        import os
        import subprocess
        import sys
        from pathlib import Path

        env = {
            **os.environ,
            "REPLAY_TRUSTED_PROXIES": "ten",
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
        result = subprocess.run(
            [sys.executable, "manage.py", "check"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode != 0
        assert (
            "REPLAY_TRUSTED_PROXIES='ten' is neither a hop count nor a list of addresses "
            "or CIDR networks"
        ) in result.stderr

    def test_a_nonsense_trusted_proxies_setting_fails_loudly(self, settings):
        from django.core.exceptions import ImproperlyConfigured

        settings.REPLAY_TRUSTED_PROXIES = "ten"
        with pytest.raises(ImproperlyConfigured, match="REPLAY_TRUSTED_PROXIES"):
            signin.client_ip(self.request("10.0.0.9", "203.0.113.5"))


class TestLockedOwnerWithSecondFactor:
    """An attacker who knows only the username cannot lock out its owner: a locked pair still
    signs in with the right password and a valid code, after a short backoff."""

    @pytest.fixture(autouse=True)
    def _limits(self, settings):
        settings.LOGIN_THROTTLE_FAILURES = 3
        settings.LOGIN_THROTTLE_WINDOW_SECONDS = 600
        settings.LOGIN_THROTTLE_BACKOFF_SECONDS = 5

    @staticmethod
    def lock(name: str, client: Client) -> None:
        for _ in range(3):
            login(client, name, "wrong")

    def test_it_signs_the_owner_in_with_password_and_code_after_the_backoff(self, client):
        cora = persona("cora")
        self.lock("cora", Client())
        early = login(client, "cora", token=current_code(cora))
        assert early.status_code == 429
        assert BACKOFF_5_SECONDS in early.content.decode()
        age_failures(6)
        response = login(client, "cora", token=current_code(cora))
        assert response.status_code == 302
        assert response["Location"] == "/traces/"
        assert failures(username="cora") == 0
        page = client.get("/traces/")
        assert page.status_code == 200
        assert page.wsgi_request.user.is_verified()

    def test_the_locked_page_offers_the_code_field(self, client):
        persona("cora")
        self.lock("cora", client)
        body = login(client, "cora").content.decode()
        assert 'name="token"' in body
        assert LOCKED_SECOND_FACTOR in body

    def test_it_keeps_refusing_the_right_password_with_a_wrong_code(self, client):
        persona("cora")
        self.lock("cora", client)
        age_failures(6)
        response = login(client, "cora", token="000000")
        assert response.status_code == 429
        assert "_auth_user_id" not in client.session
        assert failures(username="cora") == 4

    def test_it_keeps_refusing_a_wrong_password_with_a_right_code(self, client):
        cora = persona("cora")
        self.lock("cora", client)
        age_failures(6)
        response = login(client, "cora", "wrong", token=current_code(cora))
        assert response.status_code == 429
        assert "_auth_user_id" not in client.session
        assert failures(username="cora") == 4  # one failure, not one per check

    def test_a_person_without_an_authenticator_stays_locked_for_the_window(self, client):
        persona("alice")
        self.lock("alice", client)
        age_failures(6)
        response = login(client, "alice", token="123456")
        assert response.status_code == 429
        assert "_auth_user_id" not in client.session


class TestSessionRotation:
    def test_the_session_key_changes_when_the_second_factor_is_verified(self, client):
        cora = persona("cora")
        login(client, "cora")
        before = client.session.session_key
        response = client.post("/accounts/2fa/verify/", {"token": current_code(cora)})
        assert response.status_code == 302
        assert client.session.session_key != before
        assert client.get("/traces/").status_code == 200

    def test_the_session_key_changes_when_a_new_device_is_confirmed(self, client):
        adam = make_user("adam", "admin", device=False)
        login(client, "adam")
        client.get("/accounts/2fa/setup/")
        before = client.session.session_key
        device = EncryptedTOTPDevice.objects.get(user=adam)
        from django_otp.oath import totp

        code = f"{totp(device.bin_key, step=device.step, t0=device.t0):06d}"
        response = client.post("/accounts/2fa/setup/", {"token": code})
        assert response.status_code == 302
        assert client.session.session_key != before
