"""``manage.py totp USER`` prints the code django-otp accepts now, in development only."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from console.models import EncryptedTOTPDevice
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("totp", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_printed_code_is_the_one_the_device_accepts(settings):
    settings.DEBUG = True
    user = persona("cora")
    device = EncryptedTOTPDevice.objects.get(user=user, confirmed=True)
    code = _run("cora").strip()
    assert len(code) == device.digits
    assert code.isdigit()
    # django-otp's own check accepts it (its throttle would hold a wrong code's try against
    # the next one, so the right one goes first); then a wrong code is refused
    assert EncryptedTOTPDevice.objects.get(pk=device.pk).verify_token(code) is True
    wrong = f"{(int(code) + 1) % 10**device.digits:0{device.digits}d}"
    assert EncryptedTOTPDevice.objects.get(pk=device.pk).verify_token(wrong) is False


def test_refused_with_debug_off_unknown_user_or_no_device(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match=r"^refusing to print a TOTP code with DEBUG off"):
        _run("cora")
    settings.DEBUG = True
    with pytest.raises(CommandError, match=r"^no user named 'nobody'$"):
        _run("nobody")
    persona("alice")
    with pytest.raises(CommandError, match=r"^alice has no confirmed TOTP device$"):
        _run("alice")
