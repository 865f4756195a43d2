"""Small helpers the management commands share: a terminal progress bar, report printing,
the --workers option, and the --inputs / --contract files of `verify` and `ingest`."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import IO, Any

from core.formats import name_rules, rooted_format

MAX_WORKERS = 64


def workers_count(text: str) -> int:
    """``--workers N``: 1 (read in this process) up to MAX_WORKERS, or ``auto`` (the cores)."""
    if text == "auto":
        return max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"workers must be 1 to {MAX_WORKERS}, not {value}")
    return value


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=workers_count,
        default=1,
        metavar="N",
        help="read a .trace.jsonl in N processes ('auto': one per core); same report",
    )


#: An archive of an AHD run's inputs beside its sidecar: ``<run>.replay.json`` ->
#: ``<run>.inputs.tar.gz`` (or ``.tgz``, ``.zip``), used when no --inputs is given.
INPUTS_ARCHIVE_SUFFIXES = (".inputs.tar.gz", ".inputs.tgz", ".inputs.zip")


def add_inputs_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--inputs",
        action="append",
        default=[],
        metavar="FILE",
        help="an AHD sidecar's token and brief files, or one archive of them (.tar.gz, .tgz, "
        ".zip), instead of its checkout (repeatable); default: <run>.inputs.tar.gz/.tgz/.zip "
        "beside the sidecar when there is one",
    )
    parser.add_argument(
        "--contract",
        default=None,
        metavar="FILE",
        help="the contract (JSON Dict DSL) a Paxman artifact is checked against",
    )


def inputs_beside(path: Path) -> Path | None:
    """The archive of inputs lying beside a file verified against a root on disk (its
    format's ``rooted``: an AHD sidecar's ``<run>.inputs.tar.gz``), if there is one: the
    file's name less what its format's companion rule matches (``.replay.json``), then one
    of :data:`INPUTS_ARCHIVE_SUFFIXES`."""
    run = _run_name(path.name)
    if run is None:
        return None
    for suffix in INPUTS_ARCHIVE_SUFFIXES:
        candidate = path.with_name(run + suffix)
        if candidate.is_file():
            return candidate
    return None


def _run_name(name: str) -> str | None:
    """A rooted file's name less its companion rule's ``trace`` match, or None."""
    fmt = rooted_format(name)
    for rule in name_rules(fmt) if fmt is not None else ():
        found = re.search(rule.trace, name, re.IGNORECASE)
        if found is not None:
            return name[: found.start()] + name[found.end() :]
    return None


def read_inputs(
    path: Path, given: list[str], limit: int, archive_limit: int | None = None
) -> dict[str, bytes]:
    """The --inputs files by file name (each read up to ``limit`` + 1 bytes, an archive up
    to ``archive_limit`` + 1: the format refuses what is larger), else the archive beside an
    AHD sidecar; {} for neither. Raises OSError for a file that cannot be read."""
    files = [Path(g) for g in given]
    if not files:
        beside = inputs_beside(path)
        files = [beside] if beside is not None else []
    inputs = {}
    for file in files:
        packed = file.name.lower().endswith((".tar.gz", ".tgz", ".zip"))
        with file.open("rb") as fh:
            inputs[file.name] = fh.read((archive_limit or limit) + 1 if packed else limit + 1)
    return inputs


def read_contract(given: str | None, limit: int) -> tuple[str, bytes] | None:
    """The --contract file as (name, bytes); raises OSError when it cannot be read."""
    if given is None:
        return None
    file = Path(given)
    with file.open("rb") as fh:
        return file.name, fh.read(limit + 1)


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
            f"{side_text(d, 'before')} -> {side_text(d, 'after')}"
        )
    return "\n".join(lines)


ABSENT = "(absent)"


def side_text(divergence: dict[str, Any], side: str) -> str:
    """One side of a divergence as JSON, or ``(absent)`` when that side does not exist
    (``"absent"`` names it; a report that leaves the key out altogether reads the same)."""
    if divergence.get("absent") == side or side not in divergence:
        return ABSENT
    return json.dumps(divergence[side])
