"""Named personas, one per role, and the helpers that sign them in.

vera the viewer, alice the auditor, oscar the operator, adam the admin, cora and colin on the
council, lena from legal, sam who is both auditor and admin, and nora who has no role at all.
Admins and council members get a confirmed TOTP device; `sign_in` verifies the session with
it, as the OTP page would.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.oath import totp

from console import roles
from console.models import EncryptedTOTPDevice
from tests.governance.factories import roles_installed_for

PASSWORD = "correct horse battery staple"

PERSONAS: dict[str, tuple[str, ...]] = {
    "vera": (roles.VIEWER,),
    "alice": (roles.AUDITOR,),
    "oscar": (roles.OPERATOR,),
    "adam": (roles.ADMIN,),
    "cora": (roles.COUNCIL,),
    "colin": (roles.COUNCIL,),
    "lena": (roles.LEGAL,),
    "sam": (roles.AUDITOR, roles.ADMIN),
    "nora": (),
}

#: one persona per single role, for "every role" parametrisation
BY_ROLE: dict[str, str] = {
    roles.VIEWER: "vera",
    roles.AUDITOR: "alice",
    roles.OPERATOR: "oscar",
    roles.ADMIN: "adam",
    roles.COUNCIL: "cora",
    roles.LEGAL: "lena",
}
EVERYONE = ["vera", "alice", "oscar", "adam", "cora", "lena", "nora"]


def make_user(name: str, *role_names: str, device: bool | None = None) -> User:
    user = roles_installed_for(
        User.objects.create_user(name, f"{name}@example.com", PASSWORD), *role_names
    )
    if device is None:
        device = bool(set(role_names) & roles.STRONG_ROLES)
    if device:
        EncryptedTOTPDevice.objects.create(user=user, name="phone", confirmed=True)
    return user


def persona(name: str) -> User:
    existing = User.objects.filter(username=name).first()
    return existing or make_user(name, *PERSONAS[name])


def current_code(user: User) -> str:
    device = EncryptedTOTPDevice.objects.get(user=user, confirmed=True)
    code = totp(device.bin_key, step=device.step, t0=device.t0, digits=device.digits)
    return f"{code:0{device.digits}d}"


def sign_in(client: Client, user: User, *, verified: bool = True) -> Client:
    """Signs the user in; with a TOTP device and `verified`, as if the code was entered."""
    client.force_login(user)
    device = EncryptedTOTPDevice.objects.filter(user=user, confirmed=True).first()
    if device is not None and verified:
        session = client.session
        session[DEVICE_ID_SESSION_KEY] = device.persistent_id
        session.save()
    return client


def client_for(name: str, **extra: str) -> Client:
    return sign_in(Client(**extra), persona(name))
