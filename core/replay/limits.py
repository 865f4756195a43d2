"""The caps on one replay, whatever its format: a replay that exceeds one ends with
REPLAY_TIMEOUT (``REPLAY_MAX_SECONDS``, ``REPLAY_MAX_ITERATIONS``; ``replay.conf``).

Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplayLimits:
    """Caps on one replay; exceeding one ends it with REPLAY_TIMEOUT."""

    max_seconds: float | None = None
    max_iterations: int | None = None  # deterministic + external steps replayed
