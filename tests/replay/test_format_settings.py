"""A format's settings are read in its own package, through a getter (the package stays
pure): the AHD input and archive limits, the Paxman capabilities a deployment adds."""

from __future__ import annotations

import pytest

from core.formats import archive
from core.formats.ahd import MAX_INPUT_BYTES
from core.formats.ahd import settings as ahd_settings
from core.formats.paxman import settings as paxman_settings


def getter(values):
    return values.get


def test_the_ahd_limits_default_to_the_formats_own():
    assert ahd_settings.max_input_bytes(getter({})) == MAX_INPUT_BYTES
    limits = ahd_settings.archive_limits(getter({}))
    assert limits == archive.ArchiveLimits(
        max_archive_bytes=MAX_INPUT_BYTES,
        max_entries=archive.DEFAULT_LIMITS.max_entries,
        max_entry_bytes=MAX_INPUT_BYTES,
        max_total_bytes=2 * MAX_INPUT_BYTES,
        max_ratio=archive.DEFAULT_LIMITS.max_ratio,
        ratio_floor_bytes=archive.DEFAULT_LIMITS.ratio_floor_bytes,
    )


def test_the_ahd_settings_override_each_limit():
    limits = ahd_settings.archive_limits(
        getter(
            {
                "REPLAY_AHD_MAX_INPUT_BYTES": 100,
                "REPLAY_AHD_MAX_ARCHIVE_BYTES": 50,
                "REPLAY_AHD_ARCHIVE_MAX_ENTRIES": 3,
                "REPLAY_AHD_ARCHIVE_MAX_TOTAL_BYTES": 120,
                "REPLAY_AHD_ARCHIVE_MAX_RATIO": 7,
            }
        )
    )
    assert (limits.max_archive_bytes, limits.max_entries, limits.max_entry_bytes) == (50, 3, 100)
    assert (limits.max_total_bytes, limits.max_ratio) == (120, 7)


def test_a_deployment_adds_paxman_capabilities_by_setting():
    registry = paxman_settings.capabilities(
        getter({"REPLAY_PAXMAN_CAPABILITIES": {"ocr": ["2.0", "2.1"], "fx": "1.0"}}), {}
    )
    assert registry.as_dict() == {"fx": ["1.0"], "ocr": ["2.0", "2.1"]}


def test_a_paxman_capabilities_setting_that_is_not_a_mapping_is_named():
    with pytest.raises(ValueError, match=r"^REPLAY_PAXMAN_CAPABILITIES: "):
        paxman_settings.capabilities(getter({"REPLAY_PAXMAN_CAPABILITIES": ["ocr"]}), {})
