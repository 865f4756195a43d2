"""Sign-in, its throttle, sign-out, and the TOTP second factor for admin and council."""

from __future__ import annotations

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from console import throttle
from console.models import LoginFailure
from console.views import auth
from tests.console.personas import PASSWORD, current_code, make_user, persona, sign_in

pytestmark = pytest.mark.django_db


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
        assert LoginFailure.objects.filter(username="alice", ip="10.0.0.1").count() == 1

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
        assert throttle.locked_message(600) in response.content.decode()
        assert "_auth_user_id" not in client.session

    def test_it_names_the_minutes_left(self):
        assert throttle.locked_message(61) == (
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
        assert not LoginFailure.objects.filter(username="alice").exists()

    def test_failures_older_than_the_window_do_not_count(self, client):
        from datetime import timedelta

        from django.utils import timezone

        persona("alice")
        for _ in range(3):
            login(client, "alice", "wrong")
        LoginFailure.objects.update(created_at=timezone.now() - timedelta(seconds=601))
        assert throttle.login_throttle_wait(username="alice", ip="10.0.0.1") == 0
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
