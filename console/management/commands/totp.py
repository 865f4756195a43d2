"""``manage.py totp USER``: a demo user's current TOTP code, for development only.

A newcomer signing in as a council member or an admin needs a second-factor code; the demo
prints each TOTP secret, but not every machine has ``oathtool`` or an authenticator app at
hand. This prints the code the console would accept right now, computed by django-otp itself
from the user's confirmed device, and refuses with DEBUG off: in production a code is only
ever read from the person's own device.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django_otp.oath import TOTP

from console.models import EncryptedTOTPDevice


class Command(BaseCommand):
    help = "Print a user's current TOTP code (development only: refused with DEBUG off)."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        if not settings.DEBUG:
            raise CommandError("refusing to print a TOTP code with DEBUG off (development only)")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        device = EncryptedTOTPDevice.objects.filter(user=user, confirmed=True).first()
        if device is None:
            raise CommandError(f"{username} has no confirmed TOTP device")
        totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
        totp.time = time.time()
        code = str(totp.token()).zfill(device.digits)
        left = device.step - int(totp.time - device.t0) % device.step
        self.stdout.write(code)
        self.stderr.write(f"valid for {left} more second(s)")
