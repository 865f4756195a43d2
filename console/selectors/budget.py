"""What a page may read of a stored file (REPLAY_PAGE_READ_BYTES)."""

from __future__ import annotations

from console import conf
from core.errors import ReplayError
from core.formats import native


def page_read_limit() -> int:
    return conf.page_read_bytes()


def _page_limits() -> native.Limits:
    """What a page may read of a stored file: at most REPLAY_PAGE_READ_BYTES (decompressed),
    so no page's cost grows with a stored file's size or padding."""
    budget = page_read_limit()
    return native.Limits(
        max_total_bytes=budget,
        max_document_bytes=min(budget, native.DEFAULT_LIMITS.max_document_bytes),
    )


def _over_page_budget(exc: ReplayError) -> bool:
    return exc.detail.get("limit") in ("max_total_bytes", "max_document_bytes")


def page_budget_message() -> str:
    return (
        f"a page reads at most {page_read_limit()} bytes of a stored file "
        "(REPLAY_PAGE_READ_BYTES); this one is longer, so the outline stops there"
    )
