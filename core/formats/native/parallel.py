"""JSON Lines records read in worker processes (``--workers N``, :func:`_chunked_rows`).

The main process reads lines and hands them out in chunks; a worker parses, validates and
hashes each line exactly as `_serial_rows` would, and stops at the first refusal, which it
sends back as (code, message) in its place. The main process keeps what depends on order
(the record count, duplicate output refs, the chain itself) and raises each refusal when
the rows before it have been consumed, so the result is the single-process one.

Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, Any

from core.errors import ReplayError
from core.formats.jsonstrict import (
    COMPACT_CODEC,
    COMPACT_INLINE_MAX,
    NOT_PROVEN,
    loads_strict,
    parse_compact,
)
from core.formats.native.hashing import (
    _sha256,
    event_body_bytes,
    event_id_deriver,
    output_hash_of,
)
from core.formats.native.lines import (
    _WHITESPACE,
    _bad_kind,
    _blank_lines,
    _long_line,
    _parse_line,
)
from core.formats.native.runs import EventRun
from core.formats.native.schema import (
    _expect,
    _malformed,
    validate_event,
    validate_output,
    validate_step,
)
from core.formats.native.trace import Limits, Row, orjson_loads

_CHUNK_LINES = 2048
_CHUNK_BYTES = 1 << 20
assert _CHUNK_BYTES <= COMPACT_INLINE_MAX  # _event_run inlines parse_compact below it
_REPARSE_MAX = 4096  # lines up to this long come back as text, longer ones as values
_worker_state: dict[str, Any] = {}


def _worker_init(job_seed: str, limits: Limits) -> None:
    _worker_state["derive_id"] = event_id_deriver(job_seed)
    _worker_state["limits"] = limits


def _prepare_chunk(chunk: list[tuple[int, bytes]]) -> list[tuple[Any, ...]]:
    """In a worker: the rows of `chunk` ((line number, line) pairs), precomputed."""
    return _rows_of_chunk(chunk, _worker_state["derive_id"], _worker_state["limits"], False)


def _rows_of_chunk(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    keep: bool,
) -> list[tuple[Any, ...]]:
    """A run of plain events at the start of `chunk` as one row, then a row per record."""
    run, taken = _event_run(chunk, derive_id, limits, keep=keep)
    if taken == len(chunk):
        return run
    return run + _chunk_rows(chunk, derive_id, limits, keep=keep, start=taken)


def _event_run(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    *,
    keep: bool = False,
) -> tuple[list[tuple[Any, ...]], int]:
    """The plain events `chunk` starts with, as one `"events"` row (see `Row`), and how
    many lines that row covers (no row when none).

    A line of the run is an event, strictly parsed and within the shape limits, that
    `EventRun` takes. The run stops before the first line that is anything else (a step,
    an output, a refusal, an event that breaks the chain), which `_chunk_rows` then takes,
    exactly as `_serial_rows` would.
    """
    strict: list[bool] = []  # a line's value orjson.loads would not give back was taken
    run = EventRun(_parsed_events(chunk, limits, strict), derive_id)
    count = len(run.events)
    if not count:
        return [], 0
    reparse = not keep and not strict
    keep_events = not (
        reparse and sum(len(line) for _n, line in chunk[:count]) <= _REPARSE_MAX * count
    )
    return [("events", run.summary(keep_events))], count


def _parsed_events(
    chunk: list[tuple[int, bytes]], limits: Limits, strict: list[bool]
) -> Iterator[dict[str, Any]]:
    """The leading lines of `chunk` that are events (strictly parsed, within the shape
    limits), without their ``record`` key; `strict` gets an entry when one is a value
    ``orjson.loads`` would not give back (the engine must not parse its line again)."""
    max_string, max_depth = limits.max_string, limits.max_depth
    max_keys = min(limits.max_keys, limits.max_object_keys)
    codec = COMPACT_CODEC
    if codec is not None:
        fast_loads, fast_dumps, fast_errors = codec
    for _lineno, line in chunk:
        size_of_line = len(line)
        if size_of_line > _CHUNK_BYTES:  # alone in its chunk: the row path copies less
            return
        # every key needs a colon: a line no longer than the limit needs no count
        if size_of_line > max_keys and line.count(b":") > max_keys:
            return  # the row path counts its keys and decides
        if codec is None:
            obj = parse_compact(line)
        else:  # parse_compact(line), inlined: the line is shorter than COMPACT_INLINE_MAX
            try:
                obj = fast_loads(line)
                out = fast_dumps(obj)
            except fast_errors:
                obj = NOT_PROVEN
            else:
                n = len(out)
                if not (
                    (size_of_line == n or (size_of_line == n + 1 and line[n] == 0x0A))
                    and line.startswith(out)
                ):
                    obj = NOT_PROVEN
        if obj is NOT_PROVEN:  # e.g. 1e-07 where orjson writes 1e-7: the strict parser decides
            try:
                obj = loads_strict(line, where="")
            except ReplayError:
                return
            strict.append(True)
        if (
            type(obj) is not dict
            or size_of_line > max_string
            or (size_of_line > max_depth and line.count(b"{") + line.count(b"[") > max_depth)
            or obj.pop("record", None) != "event"
        ):
            return
        yield obj


def _chunk_rows(
    chunk: list[tuple[int, bytes]],
    derive_id: Callable[[int, str], str],
    limits: Limits,
    *,
    keep: bool = False,
    start: int = 0,
) -> list[tuple[Any, ...]]:
    """The rows of `chunk` as `_serial_rows` makes them, with what can be worked out ahead.

    An event parsed by `parse_compact` is sent back without its body: the main process gets
    the same value from ``orjson.loads`` of the line faster than from a pickle. Every row
    is a 5-tuple with `where` fourth; a refusal, ``("!", counted, (code, message), where,
    None)``, ends the chunk.
    """
    out: list[tuple[Any, ...]] = []
    prev: str | None = None  # the previous event's recorded hash, within this chunk
    for index in range(start, len(chunk)):
        lineno, line = chunk[index]
        where = f"line {lineno}"
        try:
            obj, proven = _parse_line(line, lineno, where, limits)
        except ReplayError as exc:
            out.append(("!", False, (exc.code, exc.message), where, None))
            return out
        try:
            kind = obj.pop("record", None)
            if kind == "event":
                event = validate_event(obj, where)
                seq = event["seq"]
                derived = derive_id(seq, event["type"])
                try:
                    body: bytes | None = event_body_bytes(event, f"event {seq}", id_is_hex=True)
                except ReplayError:
                    body = None  # the engine words it, if and when it hashes this event
                digest = None
                if body is not None and prev is not None:
                    digest = "sha256:" + _sha256(prev.encode() + body).hexdigest()
                pre = (derived, body, prev if digest is not None else None, digest)
                # a short line is cheaper to parse again than to unpickle, a long one is not
                resend = keep or not proven or len(line) > _REPARSE_MAX
                out.append(("event", event if resend else None, index, where, pre))
                prev = event["hash"]
            elif kind == "step":
                out.append(("step", validate_step(obj, where), index, where, None))
            elif kind == "output":
                ref = _expect(obj, "output_ref", (str,), where)
                del obj["output_ref"]
                try:
                    output = validate_output(ref, obj, where)
                except ReplayError as exc:
                    # refused only after the duplicate-ref check, which needs every line
                    out.append(("output!", ref, (exc.code, exc.message), where, None))
                    return out
                digest = None
                if "content" in output:
                    try:
                        digest = output_hash_of(output["content"], where)
                    except ReplayError:
                        digest = None  # the engine words it
                out.append(("output", output, index, where, (ref, digest)))
            else:
                raise _bad_kind(kind, where)
        except ReplayError as exc:
            out.append(("!", True, (exc.code, exc.message), where, None))
            return out
    return out


def _mp_context() -> Any:
    """How to start workers: fork when this process has one thread (starts in milliseconds
    and imports nothing again), spawn otherwise (forking a threaded process can deadlock)."""
    import multiprocessing
    import threading

    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class _Here:
    """A chunk's rows, worked out in this process when asked for (`workers` = 1)."""

    def __init__(self, chunk: list[tuple[int, bytes]], derive_id: Any, limits: Limits) -> None:
        self._args = (chunk, derive_id, limits)

    def result(self) -> list[tuple[Any, ...]]:
        return _rows_of_chunk(*self._args, True)


class _InProcess:
    """The part of an executor `_chunked_rows` uses, without processes."""

    def __init__(self, job_seed: str, limits: Limits) -> None:
        self._derive_id = event_id_deriver(job_seed)
        self._limits = limits

    def submit(self, _fn: Any, chunk: list[tuple[int, bytes]]) -> _Here:
        return _Here(chunk, self._derive_id, self._limits)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def _chunked_rows(stream: IO[bytes], limits: Limits, job_seed: str, workers: int) -> Iterator[Row]:
    from collections import deque

    pool: Any
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            workers, mp_context=_mp_context(), initializer=_worker_init, initargs=(job_seed, limits)
        )
        ahead = 2 * workers + 2  # chunks handed out before the first is back
    else:
        pool = _InProcess(job_seed, limits)
        ahead = 1
    pending: deque[tuple[list[tuple[int, bytes]] | None, Any]] = deque()
    state = {"lineno": 1, "done": False, "blank": 0}
    max_line = limits.max_line_bytes
    max_blank = limits.max_blank_lines
    readline = stream.readline

    def read_chunk() -> None:
        chunk: list[tuple[int, bytes]] = []
        size = 0
        lineno = state["lineno"]
        try:
            while len(chunk) < _CHUNK_LINES and size < _CHUNK_BYTES:
                lineno += 1
                line = readline(max_line + 1)
                if len(line) > max_line:
                    raise _long_line(lineno, max_line)
                if not line:
                    state["done"] = True
                    break
                if line[0] in _WHITESPACE and not line.strip():
                    state["blank"] += 1
                    if state["blank"] > max_blank:
                        raise _blank_lines(lineno, max_blank)
                    continue
                chunk.append((lineno, line))
                size += len(line)
        except Exception as exc:  # raised in its place, after the rows before it
            state["done"] = True
            if chunk:
                pending.append((chunk, pool.submit(_prepare_chunk, chunk)))
            pending.append((None, exc))
            return
        finally:
            state["lineno"] = lineno
        if chunk:
            pending.append((chunk, pool.submit(_prepare_chunk, chunk)))

    derive_id = event_id_deriver(job_seed)
    counter = {"count": 0}
    refs: set[str] = set()
    try:
        while True:
            while not state["done"] and len(pending) < ahead:
                read_chunk()
            if not pending:
                return
            chunk, future = pending.popleft()
            if chunk is None:
                raise future
            # the previous chunk's lines and rows are gone before this one's are made: a
            # chunk can be a single line of many megabytes
            yield from _chunk_out(
                chunk,
                future.result(),
                counter=counter,
                refs=refs,
                limits=limits,
                derive_id=derive_id,
            )
            del chunk, future
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _chunk_out(
    chunk: list[tuple[int, bytes]],
    result: list[tuple[Any, ...]],
    *,
    counter: dict[str, int],
    refs: set[str],
    limits: Limits,
    derive_id: Callable[[int, str], str],
) -> Iterator[Row]:
    """The rows of one chunk, in order, with what depends on the chunks before it: the
    record count and the output refs seen."""
    max_records = limits.max_records
    if result and result[0][0] == "events":  # a run of events comes first, if any
        summary = result[0][1]
        if counter["count"] + summary[5] <= max_records:
            counter["count"] += summary[5]
            yield ("events", chunk[: summary[5]], f"line {chunk[0][0]}", "", summary)
            del summary
            result = result[1:]
        else:  # the record limit falls inside the run: take it line by line, here
            result = _chunk_rows(chunk, derive_id, limits, keep=True)
    for row in result:
        kind, where = row[0], row[3]
        if kind == "!":  # ("!", counted, (code, message), where, None)
            if row[1]:  # refused after the record was counted
                counter["count"] += 1
                if counter["count"] > max_records:
                    raise _malformed(f"{where}: more than {max_records} records")
            raise ReplayError(*row[2])
        counter["count"] += 1
        if counter["count"] > max_records:
            raise _malformed(f"{where}: more than {max_records} records")
        if kind == "event":  # ("event", body or None, index, where, pre)
            event = row[1]
            if event is None:
                event = orjson_loads(chunk[row[2]][1])
                del event["record"]
            yield ("event", event, where, "", row[4])
        elif kind == "step":  # ("step", body, index, where, None)
            yield ("step", row[1], where, "", None)
        else:  # ("output", body, index, where, (ref, digest)) or
            # ("output!", ref, (code, message), where, None)
            ref = row[1] if kind == "output!" else row[4][0]
            if ref in refs:
                raise _malformed(f"{where}: output_ref {ref!r} appears twice")
            refs.add(ref)
            if kind == "output!":
                raise ReplayError(*row[2])
            yield ("output", row[1], where, ref, row[4][1])
