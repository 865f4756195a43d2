"""The console's settings, read at call time (so ``override_settings`` holds), each default
spelt once, here. ``config/settings.py`` sets them from the environment
(docs/configuration.md):

* ``REPLAY_PAGE_READ_BYTES`` (64 MiB): what one page may read of a stored file (the trace,
  event and diff pages).
* ``REPLAY_INDEX_INLINE_RECORDS`` (5000): up to how many records a page builds a missing trace
  index itself; a larger JSON Lines trace's is built in the background.
* ``REPLAY_PAGE_PARSE_BYTES`` (8 MiB): the largest stored file of a format other than native
  a page parses whole; a larger one's page reads its index alone.
* ``REPLAY_MONITORING_TOKEN`` (none): the bearer token a monitor sends for /healthz's details.
"""

from __future__ import annotations

from django.conf import settings

PAGE_READ_BYTES = 64 * 1024**2
INDEX_INLINE_RECORDS = 5000
PAGE_PARSE_BYTES = 8 * 1024**2


def page_read_bytes() -> int:
    return int(getattr(settings, "REPLAY_PAGE_READ_BYTES", PAGE_READ_BYTES))


def page_parse_bytes() -> int:
    return int(getattr(settings, "REPLAY_PAGE_PARSE_BYTES", PAGE_PARSE_BYTES))


def index_inline_records() -> int:
    return int(getattr(settings, "REPLAY_INDEX_INLINE_RECORDS", INDEX_INLINE_RECORDS))


def monitoring_token() -> str:
    return str(getattr(settings, "REPLAY_MONITORING_TOKEN", "") or "")
