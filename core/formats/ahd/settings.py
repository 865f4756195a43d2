"""The AHD format's settings, read through a getter so the package stays pure: the services
pass ``replay.conf.setting`` (``getattr(django.conf.settings, name, default)``).

- ``REPLAY_AHD_MAX_INPUT_BYTES``: one token or brief (default ``MAX_INPUT_BYTES``);
- ``REPLAY_AHD_MAX_ARCHIVE_BYTES``, ``REPLAY_AHD_ARCHIVE_MAX_ENTRIES``,
  ``REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES``, ``REPLAY_AHD_ARCHIVE_MAX_RATIO``: one archive of
  inputs, or one run handed over as an archive (:func:`archive_limits`).

- ``REPLAY_AHD_ROOT``: the server's AHD checkout, where a sidecar uploaded alone is verified
  (:func:`input_root`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.formats import archive
from core.formats.ahd import MAX_INPUT_BYTES

#: a setting by its name, or the default given
Setting = Callable[[str, Any], Any]


def input_root(setting: Setting) -> Path | None:
    root = setting("REPLAY_AHD_ROOT", None)
    return Path(root) if root else None


def max_input_bytes(setting: Setting) -> int:
    return setting("REPLAY_AHD_MAX_INPUT_BYTES", MAX_INPUT_BYTES)


def archive_limits(setting: Setting) -> archive.ArchiveLimits:
    """What reading one archive of AHD inputs may cost (settings override the defaults)."""
    default = archive.DEFAULT_LIMITS
    per_input = max_input_bytes(setting)
    return archive.ArchiveLimits(
        max_archive_bytes=setting("REPLAY_AHD_MAX_ARCHIVE_BYTES", per_input),
        max_entries=setting("REPLAY_AHD_ARCHIVE_MAX_ENTRIES", default.max_entries),
        max_entry_bytes=per_input,
        max_total_bytes=setting("REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES", 2 * per_input),
        max_ratio=setting("REPLAY_AHD_ARCHIVE_MAX_RATIO", default.max_ratio),
        ratio_floor_bytes=default.ratio_floor_bytes,
    )
