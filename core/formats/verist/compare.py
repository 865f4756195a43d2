"""Two Verist snapshots of one step compared: output and commands. Pure."""

from __future__ import annotations

from typing import Any

from core.formats.verist.snapshot import VeristFile, load_output, recorded_commands
from core.replay.diff import MISSING, diff


def _output_of(content: Any) -> Any:
    if isinstance(content, dict) and "output" in content:
        return content["output"]
    return MISSING


def _diff_result(a: Any, b: Any) -> dict[str, Any] | None:
    """Verist's ``DiffResult`` (``{equal, entries}``, paths as JSON pointers), or None for
    Verist's ``undefined`` (a side is unavailable)."""
    if a is MISSING or b is MISSING:
        return None
    entries = [e.to_json() for e in diff(a, b)]
    return {"equal": not entries, "entries": entries}


def compare_snapshots(a: VeristFile, b: VeristFile) -> dict[str, dict[str, Any] | None]:
    """Verist's ``compareSnapshots``: ``inputDiff`` always; ``outputDiff`` when both
    step-outputs can be loaded; ``commandsDiff`` when both record commands (step-commands
    first, else step-output's); ``None`` stands for Verist's ``undefined``."""
    out_a = load_output(a.snapshot)
    out_b = load_output(b.snapshot)
    return {
        "inputDiff": _diff_result(a.snapshot["input"], b.snapshot["input"]),
        "outputDiff": _diff_result(
            _output_of(out_a[1]) if out_a[0] else MISSING,
            _output_of(out_b[1]) if out_b[0] else MISSING,
        ),
        "commandsDiff": _diff_result(
            recorded_commands(a.snapshot)[0], recorded_commands(b.snapshot)[0]
        ),
    }


# --- step functions --------------------------------------------------------------------------
