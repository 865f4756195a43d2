"""Replaying a trace: the engine and its check pipeline, reports, structural diffs,
verdicts, the trace index, the reference runtime and recorder, signatures, retention's
policy and the demo traces. Pure (no Django)."""
