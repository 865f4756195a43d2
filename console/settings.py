"""Deprecated: the settings moved to :mod:`config.settings` (kept for one release).

``DJANGO_SETTINGS_MODULE=console.settings`` still works and reads the same settings; name
``config.settings`` instead. This module goes in the next release."""

from __future__ import annotations

import warnings

from config.settings import *  # noqa: F403

warnings.warn(
    "DJANGO_SETTINGS_MODULE=console.settings is deprecated: use config.settings",
    DeprecationWarning,
    stacklevel=2,
)
