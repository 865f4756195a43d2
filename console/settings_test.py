"""The tiny test overlay: fast password hashing, an isolated var/ directory."""

from __future__ import annotations

from console.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
