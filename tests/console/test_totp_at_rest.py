"""TOTP seeds at rest: stored encrypted under REPLAY_KEY_ENCRYPTION_KEY, used by django-otp
through the console's device model, shown in clear only on the set-up page."""

from __future__ import annotations

import base64
import re

import pytest
from django.db import connection

from console.models import EncryptedTOTPDevice
from console.otp import SEALED_MARK, TotpKeyError, seal_totp_key
from tests.console.personas import PASSWORD, current_code, make_user, persona

pytestmark = pytest.mark.django_db


def stored_key(device) -> str:
    with connection.cursor() as cur:
        cur.execute("SELECT key FROM otp_totp_totpdevice WHERE id = %s", [device.pk])
        return cur.fetchone()[0]


def test_a_new_device_stores_its_seed_encrypted(client):
    adam = make_user("adam", "admin", device=False)
    client.post("/accounts/login/", {"username": "adam", "password": PASSWORD})
    page = client.get("/accounts/2fa/setup/").content.decode()
    secret = re.search(r'id="otp-secret"[^>]*>([A-Z2-7=]+)<', page)[1]
    device = EncryptedTOTPDevice.objects.get(user=adam)
    raw = stored_key(device)
    assert raw.startswith(SEALED_MARK)
    assert len(raw) <= 80  # django-otp's column
    assert device.bin_key == base64.b32decode(secret)
    assert device.bin_key.hex() not in raw
    assert secret not in raw


def test_the_encrypted_seed_verifies_codes_and_wakes_the_strong_role(client):
    cora = persona("cora")
    assert stored_key(EncryptedTOTPDevice.objects.get(user=cora)).startswith(SEALED_MARK)
    client.post("/accounts/login/", {"username": "cora", "password": PASSWORD})
    response = client.post("/accounts/2fa/verify/", {"token": current_code(cora)})
    assert response.status_code == 302
    assert client.get("/traces/").status_code == 200


def test_the_ciphertext_is_bound_to_its_owner():
    cora, colin = persona("cora"), persona("colin")
    stolen = stored_key(EncryptedTOTPDevice.objects.get(user=cora))
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE otp_totp_totpdevice SET key = %s WHERE user_id = %s", [stolen, colin.pk]
        )
    device = EncryptedTOTPDevice.objects.get(user=colin)
    with pytest.raises(TotpKeyError, match="REPLAY_KEY_ENCRYPTION_KEY"):
        device.bin_key  # noqa: B018


def test_another_key_encryption_key_cannot_read_the_seed(settings):
    device = EncryptedTOTPDevice.objects.get(user=persona("cora"))
    settings.REPLAY_KEY_ENCRYPTION_KEY = "another key"
    with pytest.raises(TotpKeyError) as caught:
        device.bin_key  # noqa: B018
    assert str(caught.value) == (
        "a TOTP seed cannot be decrypted: REPLAY_KEY_ENCRYPTION_KEY is not the one it was "
        "stored under"
    )


def test_the_migration_encrypts_existing_plain_seeds_and_they_still_verify(client):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("console.migrations.0002_totp_seeds_encrypted")
    cora = persona("cora")
    device = EncryptedTOTPDevice.objects.get(user=cora)
    plain_hex = device.bin_key.hex()
    with connection.cursor() as cur:  # as django-otp stored it before
        cur.execute("UPDATE otp_totp_totpdevice SET key = %s WHERE id = %s", [plain_hex, device.pk])
    migration.seal_plain_seeds(apps, None)
    raw = stored_key(device)
    assert raw.startswith(SEALED_MARK)
    assert plain_hex not in raw
    device.refresh_from_db()
    assert device.bin_key.hex() == plain_hex
    migration.seal_plain_seeds(apps, None)  # idempotent: a sealed seed is left alone
    assert stored_key(device) == raw
    migration.unseal_seeds(apps, None)
    assert stored_key(device) == plain_hex


def test_sealing_is_deterministic_in_length_but_not_in_bytes():
    key = "3132333435363738393031323334353637383930"
    first, second = seal_totp_key(key, user_id=7), seal_totp_key(key, user_id=7)
    assert first != second
    assert len(first) == len(second) <= 80


def test_the_demo_command_prints_the_seed_it_encrypted(settings):
    import io

    from django.core.management import call_command

    settings.DEBUG = True
    out = io.StringIO()
    call_command("demo", "--no-traces", stdout=out)
    device = EncryptedTOTPDevice.objects.get(user__username="cora")
    secret = base64.b32encode(device.bin_key).decode()
    assert secret in out.getvalue()
    assert stored_key(device).startswith(SEALED_MARK)


def test_a_verified_session_names_the_console_device(client):
    cora = persona("cora")
    client.post("/accounts/login/", {"username": "cora", "password": PASSWORD})
    client.post("/accounts/2fa/verify/", {"token": current_code(cora)})
    from django_otp import DEVICE_ID_SESSION_KEY

    assert client.session[DEVICE_ID_SESSION_KEY].startswith("console.encryptedtotpdevice/")
