"""The replay app's settings, read at call time (so ``override_settings`` holds), each default
spelt once: here, or in the pure module whose limit it is (a format's own settings accessors,
:mod:`core.formats.ahd.settings`, read through :func:`setting`).

``config/settings.py`` sets them from the environment (docs/configuration.md):

* ``REPLAY_MAX_UPLOAD_BYTES`` (2 GiB): the largest accepted upload.
* ``REPLAY_MAX_DECOMPRESSED_BYTES``, ``REPLAY_MAX_GZIP_RATIO``,
  ``REPLAY_GZIP_RATIO_FLOOR_BYTES``, ``REPLAY_MAX_BLANK_LINES``, ``REPLAY_MAX_JSON_KEYS``,
  ``REPLAY_MAX_OBJECT_KEYS``: what reading one upload may cost (the native format's
  ``DEFAULT_LIMITS`` unless set).
* ``REPLAY_MAX_SECONDS`` (3600), ``REPLAY_MAX_ITERATIONS`` (none; ``0`` in the environment):
  caps on one native trace's verification or replay, past either ``REPLAY_TIMEOUT``.
* ``REPLAY_AHD_MAX_INPUT_BYTES`` and the ``REPLAY_AHD_*`` archive limits: the AHD format's
  (:mod:`core.formats.ahd.settings`); every format's companion limits are read through
  :func:`input_limits` (its own ``input_limits`` member, else the default) and
  :func:`largest_input_limits` (before the format is known).
* ``REPLAY_TASK_RUNNER`` (``eager`` when the settings name none), ``REPLAY_TASK_THREADS`` (2),
  ``REPLAY_PERIODIC_IN_PROCESS`` (on), ``REPLAY_STALE_SECONDS`` (900), ``CELERY_BROKER_URL``
  (none), ``CELERY_BEAT_SCHEDULE`` (empty): where queued work runs (replay/background.py).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from core.formats import archive, native
from core.formats import input_limits as formats_input_limits
from core.formats import largest_input_limits as formats_largest_input_limits
from core.formats.ahd import settings as ahd_settings
from core.formats.protocol import InputLimits
from core.replay.limits import ReplayLimits

MAX_UPLOAD_BYTES = 2 * 1024**3
MAX_REPLAY_SECONDS = 3600.0
TASK_THREADS = 2
STALE_SECONDS = 900


def setting(name: str, default: Any) -> Any:
    """A setting by its name, or ``default``: what a pure format's settings accessors read
    (they spell their own defaults)."""
    return getattr(settings, name, default)


def upload_limits() -> native.Limits:
    """What reading one upload may cost (settings override the native format's defaults)."""
    default = native.DEFAULT_LIMITS
    return native.Limits(
        max_total_bytes=setting("REPLAY_MAX_DECOMPRESSED_BYTES", default.max_total_bytes),
        max_ratio=setting("REPLAY_MAX_GZIP_RATIO", default.max_ratio),
        ratio_floor=setting("REPLAY_GZIP_RATIO_FLOOR_BYTES", default.ratio_floor),
        max_blank_lines=setting("REPLAY_MAX_BLANK_LINES", default.max_blank_lines),
        max_keys=setting("REPLAY_MAX_JSON_KEYS", default.max_keys),
        max_object_keys=setting("REPLAY_MAX_OBJECT_KEYS", default.max_object_keys),
    )


def max_upload_bytes() -> int:
    return setting("REPLAY_MAX_UPLOAD_BYTES", MAX_UPLOAD_BYTES)


def replay_limits() -> ReplayLimits:
    return ReplayLimits(
        max_seconds=setting("REPLAY_MAX_SECONDS", MAX_REPLAY_SECONDS),
        max_iterations=setting("REPLAY_MAX_ITERATIONS", None),
    )


def input_limits(fmt: Any) -> InputLimits:
    """How large a companion file of ``fmt`` (a format object; None: a format without its
    own) and an archive of them may be: the format's ``input_limits``, else the default
    (``protocol.DEFAULT_INPUT_LIMITS``, ``archive.DEFAULT_LIMITS``)."""
    return formats_input_limits(fmt, setting)


def largest_input_limits() -> InputLimits:
    """What a companion is read up to before its format is known (a multipart upload's
    parts, ``--inputs``, ``--contract``): the largest any registered format allows; its
    format then refuses what is beyond its own."""
    return formats_largest_input_limits(setting)


def ahd_max_input_bytes() -> int:
    """``REPLAY_AHD_MAX_INPUT_BYTES``: the largest AHD token or brief file read."""
    return ahd_settings.max_input_bytes(setting)


def ahd_archive_limits() -> archive.ArchiveLimits:
    """What reading one archive of AHD inputs may cost."""
    return ahd_settings.archive_limits(setting)


def task_runner() -> str:
    """``REPLAY_TASK_RUNNER``: ``celery``, ``thread`` or ``eager`` (replay/background.py)."""
    return setting("REPLAY_TASK_RUNNER", "eager")


def task_threads() -> int:
    return max(1, int(setting("REPLAY_TASK_THREADS", TASK_THREADS)))


def periodic_in_process() -> bool:
    return bool(setting("REPLAY_PERIODIC_IN_PROCESS", True))


def stale_seconds() -> int:
    """``REPLAY_STALE_SECONDS``: a replay still queued this long lost its task."""
    return max(1, int(setting("REPLAY_STALE_SECONDS", STALE_SECONDS)))


def broker_url() -> str:
    """``CELERY_BROKER_URL``, or ``""`` when none is configured."""
    return setting("CELERY_BROKER_URL", None) or ""


def beat_schedule() -> dict[str, Any]:
    return setting("CELERY_BEAT_SCHEDULE", {}) or {}
