"""Small helpers the management commands share: a terminal progress bar, report printing."""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any


class ProgressBar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.label = label
        self.total = total or 0
        self._last = 0.0

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        if self.total:
            frac = min(1.0, done / self.total)
            bar = "#" * int(frac * 30)
            self.stream.write(f"\r{self.label} [{bar:<30}] {frac:6.1%}")
        else:
            self.stream.write(f"\r{self.label} {done:,}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def dump_report(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, sort_keys=False)


def summarise(report: dict[str, Any]) -> str:
    """A person's reading of a report: verdict first, then each check."""
    head = f"{report['status']}"
    if report.get("error_code"):
        head += f" {report['error_code']}: {report.get('message', '')}"
    if not report.get("authoritative", True):
        head += " (non-authoritative)"
    lines = [head]
    for check in report.get("checks", []):
        lines.append(f"  {'ok  ' if check['ok'] else 'FAIL'} {check['name']}: {check['detail']}")
    for d in report.get("divergences", [])[:20]:
        lines.append(
            f"  diverged at step {d['step']} {d['path'] or '/'}: "
            f"{json.dumps(d.get('before'))} -> {json.dumps(d.get('after'))}"
        )
    return "\n".join(lines)
