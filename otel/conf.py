"""The OTLP receiver's settings, read at call time (``override_settings`` holds); each default
is spelt here once, and ``config/settings.py`` sets them from the environment
(docs/configuration.md):

* ``REPLAY_OTLP_MAX_BODY_BYTES`` (8 MiB): the largest request body as sent (gzip or not);
  more is 413 before anything is decoded.
* ``REPLAY_OTLP_MAX_DECODED_BYTES`` (16 MiB): the largest body once gzip is undone; a gzip
  bomb stops being inflated one byte past it (413).
* ``REPLAY_OTEL_SEAL_AFTER_S`` (30): a trace whose root span has arrived is sealed once no
  span of it arrived for this long.
* ``REPLAY_OTEL_SEAL_ORPHAN_AFTER_S`` (3600): a trace whose root never arrives is sealed
  anyway after this long without a span, so it is audited (its span tree is then not whole).
"""

from __future__ import annotations

from django.conf import settings

MAX_BODY_BYTES = 8 * 1024**2
MAX_DECODED_BYTES = 16 * 1024**2
SEAL_AFTER_S = 30.0
SEAL_ORPHAN_AFTER_S = 3600.0


def max_body_bytes() -> int:
    return int(getattr(settings, "REPLAY_OTLP_MAX_BODY_BYTES", MAX_BODY_BYTES))


def max_decoded_bytes() -> int:
    return int(getattr(settings, "REPLAY_OTLP_MAX_DECODED_BYTES", MAX_DECODED_BYTES))


def seal_after_s() -> float:
    return float(getattr(settings, "REPLAY_OTEL_SEAL_AFTER_S", SEAL_AFTER_S))


def seal_orphan_after_s() -> float:
    return float(getattr(settings, "REPLAY_OTEL_SEAL_ORPHAN_AFTER_S", SEAL_ORPHAN_AFTER_S))
