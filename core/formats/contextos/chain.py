"""The hash chain of seed 004 (``verify-chain.ts``): the entries in the seed's order
(:func:`entries`), their canonical bytes under the reference rule (:func:`reference_bytes`,
which also collects the pointers its allow-list leaves out, :func:`unprotected_paths`) or
the alternative one, :func:`verify_chain`, and a record's hash (:func:`record_hash`).

Fast where it is proven: the reference chain and a parsed record's hash are computed by the
compiled writer (``_compiled.c``, built at install; :func:`_verify_chain_compiled`), which
writes what the exact writer (:func:`_fused_write`) writes and hands back what it does not
handle. Without it, a payload or a parsed record is written by ``orjson`` from an
allow-listed copy (:func:`_fast_keep`) only when every kept value is one it writes as
``JSON.stringify`` does, else by the exact writer. The hot loop of :func:`verify_chain` and
everything it calls stay in this one module on purpose.

Pure: no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from core.canonical import (
    CanonicalError,
    _js_number,
    _js_primitive_write,
    contextos,
    js_sorted,
)
from core.formats.contextos.reader import ContextosTrace, Envelopes, _orjson

try:
    from core.formats.contextos import _compiled
except ImportError:  # not built (a source tree without `pip install`): the Python writers
    _compiled = None  # type: ignore[assignment]

REFERENCE = "reference"
ALTERNATIVE = "alternative"
RULES = {
    REFERENCE: "JSON.stringify(obj, Object.keys(obj).sort()) (seed 004's canonical)",
    ALTERNATIVE: "full recursive key sort (js-sorted), tool envelopes without payload_hash",
}
#: never inside a hashed payload, whichever rule
NEVER_HASHED = (
    "/trace_id",
    "/schema_version",
    "/pack_version",
    "/kg_snapshot_id",
    "/audit/chain_root_hash",
    "/audit/signed_by",
)
MAX_UNPROTECTED = 200


@dataclass
class Entry:
    idx: int | float
    kind: str
    payload: dict[str, Any]
    recorded: str


def _recorded(value: Any) -> str:
    # t.call.payload_hash ?? ""
    return "" if value is None else value


def entries(trace: ContextosTrace, rule: str = REFERENCE, *, lazy: bool = False) -> Iterator[Any]:
    """The chain's entries in the seed's order, with the payload ``rule`` hashes (``lazy``:
    each tool envelope as ``(i, envelope)``, its two entries left to the caller)."""
    head = trace.head
    invoke = head["invoke"]
    yield Entry(
        0,
        "invoke",
        {"kind": "invoke", "ctx": invoke["run_context"], "req": invoke["request"]},
        invoke["envelope_hash"],
    )
    count = 1
    for i, env in enumerate(trace.envelopes):
        if lazy:
            yield (i, env)
            count += 2
            continue
        call, result = env["call"], env["result"]
        if rule == ALTERNATIVE:
            call_body = {k: v for k, v in call.items() if k != "payload_hash"}
            result_body = {k: v for k, v in result.items() if k != "payload_hash"}
        else:
            call_body, result_body = call, result
        yield Entry(
            i + 1,
            "tool_call",
            {"kind": "tool_call", "call": call_body},
            _recorded(call.get("payload_hash")),
        )
        yield Entry(
            i + 1.5,
            "tool_result",
            {"kind": "tool_result", "result": result_body},
            _recorded(result.get("payload_hash")),
        )
        count += 2
    yield Entry(
        count,  # entries.length when the record's entry is pushed
        "decision_record",
        {"kind": "decision_record", "dr": head["decision_record"]},
        head["audit"]["chain_prev_hash"],
    )


def canonical_for(rule: str) -> Callable[[Any], bytes]:
    return js_sorted if rule == ALTERNATIVE else contextos


class _Full(set):
    """A sink that keeps nothing more (the writers add one pointer or a shape's at once);
    it says it is over any bound, so that the writers do not even spell the pointers."""

    def add(self, _item: Any) -> None:
        return None

    def update(self, *_others: Any) -> None:
        return None

    def __len__(self) -> int:
        return _OVER


_OVER = 2**62


def _add_paths(dropped: Any, paths: tuple[str, ...]) -> None:
    """``paths`` added to ``dropped`` in their order while it holds at most
    ``MAX_UNPROTECTED`` pointers (the compiled writer's rule: one entry's pointers never grow
    a sink past the bound by more than one, however many keys it leaves out)."""
    if len(dropped) + len(paths) <= MAX_UNPROTECTED + 1:
        dropped.update(paths)
        return
    for path in paths:
        if len(dropped) > MAX_UNPROTECTED:
            return
        dropped.add(path)


def _add_left_out(dropped: Any, o: dict[str, Any], allowed: frozenset[str], at: str) -> None:
    """The pointers of ``o``'s left-out keys, in its order, added as :func:`_add_paths`
    adds them; none spelt past the bound (a hostile object has many)."""
    for key in o:
        if len(dropped) > MAX_UNPROTECTED:
            return
        if key not in allowed:
            dropped.add(f"{at}/{_pointer_part(key)}")


#: shapes (objects) the writers remember what they keep and drop of: at most this many keys,
#: at a pointer of at most ``_SHAPE_AT`` characters (the caches stay small whatever comes)
_SHAPE_KEYS = 32
_SHAPE_AT = 256


def _small(keys: tuple[str, ...]) -> bool:
    """Whether a shape's keys are short enough to remember: each cache then holds at most
    4096 shapes of at most 32 keys of 256 characters in all, at pointers of at most 256
    characters, whatever the uploads were."""
    return sum(map(len, keys)) <= _SHAPE_AT


@dataclass
class ChainResult:
    rule: str
    ok: bool
    verified: int  # entries that verified before the break
    broke_at: int | float | None = None
    kind: str | None = None
    expected: str | None = None  # the computed hash
    observed: str | None = None  # the recorded one
    problem: str | None = None

    def verdict(self) -> dict[str, Any]:
        """As ``verifyChain`` returns it."""
        if self.ok:
            return {"ok": True}
        return {
            "ok": False,
            "broke_at": self.broke_at,
            "expected": self.expected,
            "observed": self.observed,
        }


def verify_chain(
    trace: ContextosTrace,
    rule: str = REFERENCE,
    *,
    unprotected: set[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ChainResult:
    """``verifyChain`` under ``rule``; ``unprotected`` collects the pointers the reference
    rule's allow-list leaves out."""
    if rule == REFERENCE and _compiled is not None:
        return _verify_chain_compiled(trace, unprotected, progress)
    canon = canonical_for(rule)
    sink: set[str] = set()
    prev = b""
    done = 0
    fast = rule == REFERENCE and _orjson is not None
    for entry in entries(trace, rule, lazy=fast):
        if type(entry) is tuple:  # a tool envelope's two entries, unbuilt (the fast path)
            i, env = entry
            for key, kind, step, plist, allowed, at, head, tail in _TOOL_PARTS:
                body_of = env[key]
                idx = i + step
                recorded = body_of.get("payload_hash")
                if recorded is None:
                    recorded = ""  # t.call.payload_hash ?? ""
                # the common case inline: a known shape whose kept values are all written
                # alike by orjson and JSON.stringify (what _fast_keep returns as it is)
                body = None
                plan = _PLANS.get((plist, at, tuple(body_of)))
                if plan is not None:
                    keys, paths = plan
                    if paths:
                        _add_paths(sink, paths)
                    if len(keys) == 1:
                        k = keys[0]
                        kept = {k: body_of[k]}
                    else:
                        kept = dict(zip(keys, map(body_of.__getitem__, keys), strict=True))
                    if set(map(type, kept.values())) <= _LEAVES:
                        try:  # noqa: SIM105 - a with-block costs more here
                            body = head + _orjson.dumps(kept) + tail
                        except _orjson.JSONEncodeError:
                            pass  # the exact writer below decides
                if body is None:
                    try:
                        kept = _fast_keep(body_of, plist, allowed, at, sink)
                        body = head + _orjson.dumps(kept) + tail
                    except (_Slow, RecursionError, _orjson.JSONEncodeError):
                        pass
                if body is None:
                    exact = Entry(idx, kind, {"kind": kind, key: body_of}, recorded)
                    try:
                        body = _exact_reference_bytes(exact, sink)
                    except (CanonicalError, RecursionError) as exc:
                        return ChainResult(rule, False, done, idx, kind, None, recorded, str(exc))
                if len(sink) > MAX_UNPROTECTED and type(sink) is not _Full:
                    if unprotected is not None:
                        unprotected.update(sink)
                    sink = _Full()
                computed = "sha256:" + hashlib.sha256(prev + body).hexdigest()
                if computed != recorded:
                    if unprotected is not None:
                        unprotected.update(sink)
                    return ChainResult(rule, False, done, idx, kind, computed, recorded)
                prev = computed.encode()
                done += 1
                if progress is not None and done % 1000 == 0:
                    progress(done)
            continue
        try:
            if fast:
                body = _fast_head_bytes(entry, sink) or _exact_reference_bytes(entry, sink)
            else:
                body = reference_bytes(entry, sink) if rule == REFERENCE else canon(entry.payload)
        except (CanonicalError, RecursionError) as exc:
            return ChainResult(
                rule, False, done, entry.idx, entry.kind, None, entry.recorded, str(exc)
            )
        # enough to say; stop collecting (bounded memory)
        if len(sink) > MAX_UNPROTECTED and type(sink) is not _Full:
            if unprotected is not None:
                unprotected.update(sink)
            sink = _Full()
        computed = "sha256:" + hashlib.sha256(prev + body).hexdigest()
        if computed != entry.recorded:
            if unprotected is not None:
                unprotected.update(sink)
            return ChainResult(rule, False, done, entry.idx, entry.kind, computed, entry.recorded)
        prev = computed.encode()
        done += 1
        if progress is not None and done % 1000 == 0:
            progress(done)
    if unprotected is not None:
        unprotected.update(sink)
    return ChainResult(rule, True, done)


_WHERE = {
    "invoke": {"ctx": "/invoke/run_context", "req": "/invoke/request"},
    "tool_call": {"call": "/tool_envelopes/*/call"},
    "tool_result": {"result": "/tool_envelopes/*/result"},
    "decision_record": {"dr": "/decision_record"},
}


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def unprotected_paths(entry: Entry) -> set[str]:
    """The fields of one entry that the reference rule does not hash: every key, at any
    depth below the payload's top level, that is not spelt like one of the payload's own
    top-level keys (the array replacer's allow-list)."""
    allowed = set(entry.payload)
    out: set[str] = set()

    def walk(value: Any, at: str) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                here = f"{at}/{_pointer_part(key)}"
                if key in allowed:
                    walk(sub, here)
                else:
                    out.add(here)
        elif isinstance(value, list):
            for sub in value:
                walk(sub, f"{at}/*")

    for key, where in _WHERE[entry.kind].items():
        walk(entry.payload[key], where)
    return out


#: the allow-list of each entry's payload: its own top-level keys, sorted (``canonical``)
_PLISTS = {
    "invoke": ("ctx", "kind", "req"),
    "tool_call": ("call", "kind"),
    "tool_result": ("kind", "result"),
    "decision_record": ("dr", "kind"),
}
_ALLOWED = {kind: frozenset(plist) for kind, plist in _PLISTS.items()}
#: a tool envelope's two entries: (key, kind, idx step, allow-list, allowed, pointer, and the
#: canonical bytes around the kept body, in the allow-list's order "call" < "kind" < "result")
_TOOL_PARTS = (
    (
        "call",
        "tool_call",
        1,
        _PLISTS["tool_call"],
        _ALLOWED["tool_call"],
        "/tool_envelopes/*/call",
        b'{"call":',
        b',"kind":"tool_call"}',
    ),
    (
        "result",
        "tool_result",
        1.5,
        _PLISTS["tool_result"],
        _ALLOWED["tool_result"],
        "/tool_envelopes/*/result",
        b'{"kind":"tool_result","result":',
        b"}",
    ),
)
_QUOTED = {k: f'"{k}":' for plist in _PLISTS.values() for k in plist}
_DROPPED: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}  # small shapes only
#: (allow-list, pointer or None, keys in order) -> (kept keys in allow-list order, dropped)
_PLANS: dict[tuple[Any, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _fused_write(  # noqa: PLR0917 - the hot recursion: positional on purpose
    o: Any, plist: tuple[str, ...], allowed: frozenset[str], out: list[str], at: str, dropped: set
) -> None:
    if type(o) is dict:
        # the same shapes repeat from entry to entry and file to file: their dropped
        # pointers are spelt once (the parent pointer fixes the allow-list)
        if len(o) > _SHAPE_KEYS or len(at) > _SHAPE_AT:
            _add_left_out(dropped, o, allowed, at)
        else:
            shape = (at, tuple(o))
            paths = _DROPPED.get(shape)
            if paths is None:
                paths = tuple(f"{at}/{_pointer_part(key)}" for key in o if key not in allowed)
                if len(_DROPPED) < 4096 and _small(shape[1]):  # a bounded cache
                    _DROPPED[shape] = paths
            if paths:
                _add_paths(dropped, paths)
        out.append("{")
        first = True
        for k in plist:
            if k in o:
                v = o[k]
            else:
                continue  # "__proto__" is never in these allow-lists
            if first:
                first = False
            else:
                out.append(",")
            out.append(_QUOTED[k])
            _fused_write(v, plist, allowed, out, f"{at}/{k}", dropped)
        out.append("}")
    elif type(o) is list:
        out.append("[")
        inner = f"{at}/*"
        for i, v in enumerate(o):
            if i:
                out.append(",")
            _fused_write(v, plist, allowed, out, inner, dropped)
        out.append("]")
    else:
        _js_primitive_write(o, out)


class _Slow(Exception):
    """A value the fast writer does not prove it writes as JSON.stringify does."""


_SAFE_INT = 2**53
_PROTO = "__proto__"
#: the values orjson and JSON.stringify always write alike (a lone surrogate: orjson refuses)
_LEAVES = frozenset({str, bool, type(None)})


def _fast_keep(
    o: Any, plist: tuple[str, ...], allowed: frozenset[str], at: str | None, dropped: Any
) -> Any:
    """``o`` with only the allow-listed keys kept (in ``plist`` order: ``plist`` must be sorted
    in code point order, as an ASCII allow-list sorted by UTF-16 code units is) for
    ``orjson.dumps``,
    and the dropped pointers added to ``dropped`` (``None``: not collected). Raises
    :class:`_Slow` for a value ``orjson`` could write otherwise than ``JSON.stringify``: a
    float (number spelling differs), an integer beyond 2**53 (JS rounds it to a double), a
    type JSON has no name for. Strings are written identically (``orjson`` and
    ``JSON.stringify`` escape the same characters the same way; ``orjson`` refuses a lone
    surrogate, and the caller then takes the exact writer)."""
    if type(o) is dict:
        # the same shapes repeat from entry to entry and file to file: what a shape keeps
        # (in the allow-list's order) and the pointers it drops are worked out once per
        # (allow-list, pointer, keys in the file's order); ``at`` is None when the dropped
        # pointers are not collected
        if len(o) > _SHAPE_KEYS or (at is not None and len(at) > _SHAPE_AT):
            # a large shape: neither remembered nor its pointers spelt past the bound
            keys = tuple(k for k in plist if k in o)
            if at is not None:
                _add_left_out(dropped, o, allowed, at)
        else:
            shape = (plist, at, tuple(o))
            plan = _PLANS.get(shape)
            if plan is None:
                plan = (
                    tuple(k for k in plist if k in o),
                    ()
                    if at is None
                    else tuple(f"{at}/{_pointer_part(key)}" for key in o if key not in allowed),
                )
                if len(_PLANS) < 4096 and _small(shape[2]):  # a bounded cache
                    _PLANS[shape] = plan
            keys, paths = plan
            if paths:
                _add_paths(dropped, paths)
        if not keys:
            return {}
        if len(keys) == 1:
            k = keys[0]
            kept = {k: o[k]}
        else:
            kept = dict(zip(keys, map(o.__getitem__, keys), strict=True))
        if set(map(type, kept.values())) <= _LEAVES:
            return kept
        for k, v in kept.items():
            t = type(v)
            if t is dict:
                sub = None if at is None else f"{at}/{k}"
                # inline: a known shape that keeps nothing (no call)
                plan = _PLANS.get((plist, sub, tuple(v)))
                if plan is not None and not plan[0]:
                    if plan[1]:
                        _add_paths(dropped, plan[1])
                    kept[k] = {}
                else:
                    kept[k] = _fast_keep(v, plist, allowed, sub, dropped)
            elif t is list:
                if set(map(type, v)) <= _LEAVES:
                    continue  # written as it is (no call)
                kept[k] = _fast_keep(
                    v, plist, allowed, None if at is None else f"{at}/{k}", dropped
                )
            elif not (t in _LEAVES or (t is int and -_SAFE_INT <= v <= _SAFE_INT)):
                raise _Slow
        return kept
    if type(o) is list:
        if set(map(type, o)) <= _LEAVES:
            return o  # written as it is
        inner = None if at is None else f"{at}/*"
        out: list[Any] = []
        for v in o:
            t = type(v)
            if t is dict:
                # inline: a known shape that keeps nothing (no call)
                plan = _PLANS.get((plist, inner, tuple(v)))
                if plan is not None and not plan[0]:
                    if plan[1]:
                        _add_paths(dropped, plan[1])
                    out.append({})
                else:
                    out.append(_fast_keep(v, plist, allowed, inner, dropped))
            elif t is list:
                out.append(_fast_keep(v, plist, allowed, inner, dropped))
            elif t in _LEAVES or (t is int and -_SAFE_INT <= v <= _SAFE_INT):
                out.append(v)
            else:
                raise _Slow
        return out
    t = type(o)
    if t is str or o is None or t is bool or (t is int and -_SAFE_INT <= o <= _SAFE_INT):
        return o
    raise _Slow


#: the invoke and record entries' canonical bytes around their kept bodies
_HEAD_LAYOUT = {
    "invoke": (("ctx", b'{"ctx":'), ("req", b',"kind":"invoke","req":'), (None, b"}")),
    "decision_record": (("dr", b'{"dr":'), (None, b',"kind":"decision_record"}')),
}


def _fast_head_bytes(entry: Entry, dropped: Any) -> bytes | None:
    """:func:`reference_bytes`' fast path for the invoke and record entries, each kept body
    written by ``orjson`` between the constant bytes around it; None when the exact writer
    must decide."""
    kind = entry.kind
    plist, allowed, where = _PLISTS[kind], _ALLOWED[kind], _WHERE[kind]
    payload = entry.payload
    out = []
    try:
        for key, before in _HEAD_LAYOUT[kind]:
            out.append(before)
            if key is not None:
                out.append(
                    _orjson.dumps(_fast_keep(payload[key], plist, allowed, where[key], dropped))
                )
    except (_Slow, RecursionError, _orjson.JSONEncodeError):
        return None
    return b"".join(out)


def reference_bytes(entry: Entry, dropped: set[str]) -> bytes:
    """``canonical(entry.payload)`` under the reference rule, and the pointers its allow-list
    leaves out added to ``dropped``, in one walk: the same bytes as
    :func:`core.canonical.contextos` for a payload read from JSON (string keys, surrogate
    pairs already joined by the decoder); the tests hold it to both.

    Fast: the allow-listed copy written by ``orjson`` (:func:`_fast_keep`), when every kept
    value is one it writes as ``JSON.stringify`` does; else the exact writer."""
    if _orjson is not None:
        kind = entry.kind
        plist = _PLISTS[kind]
        allowed = _ALLOWED[kind]
        where = _WHERE[kind]
        payload = entry.payload
        try:
            return _orjson.dumps(
                {
                    key: kind
                    if key == "kind"
                    else _fast_keep(payload[key], plist, allowed, where[key], dropped)
                    for key in plist
                }
            )
        except (_Slow, RecursionError, _orjson.JSONEncodeError):
            pass  # the exact writer below decides (and adds the same pointers)
    return _exact_reference_bytes(entry, dropped)


def _exact_reference_bytes(entry: Entry, dropped: set[str]) -> bytes:
    plist = _PLISTS[entry.kind]
    allowed = frozenset(plist)
    out: list[str] = ["{"]
    first = True
    for key in plist:
        if first:
            first = False
        else:
            out.append(",")
        out.append(_QUOTED[key])
        if key == "kind":
            out.append(f'"{entry.kind}"')
        else:
            _fused_write(entry.payload[key], plist, allowed, out, _WHERE[entry.kind][key], dropped)
    out.append("}")
    return "".join(out).encode()


def record_hash(record: Any) -> str:
    """``hash(persisted_record)`` of ``diff.ts``: ``"sha256:" + sha256(canonical(record))``
    (the seed's canonical whichever rule the chain matched: the alternative rule is the
    chain's only)."""
    return "sha256:" + hashlib.sha256(contextos(record)).hexdigest()


#: a record's keys in its order -> (its allow-list, as a set) when it is ASCII without
#: __proto__, else () (the exact writer)
_RECORD_PLISTS: dict[tuple[str, ...], tuple[Any, ...]] = {}


def _parsed_record_hash(record: dict[str, Any]) -> str:
    """:func:`record_hash` of a record read from JSON by :func:`parse` (string keys, no
    surrogate code point: the read refuses lone surrogates and joins pairs), fast: its
    allow-listed copy written by ``orjson`` when the allow-list (its own keys) is ASCII
    (code point order = UTF-16 order) without ``__proto__`` and every kept value is one
    ``orjson`` writes as ``JSON.stringify`` does (:func:`_fast_keep`); else the exact
    writer. The tests hold both to the same hashes on any JSON."""
    if _orjson is not None and type(record) is dict:
        shape = tuple(record)
        lists = _RECORD_PLISTS.get(shape)
        if lists is None:
            plist = tuple(sorted(record))
            fast = _PROTO not in record and all(k.isascii() for k in plist)
            lists = (plist, frozenset(plist)) if fast else ()
            # a bounded cache, of records with few short keys
            if len(_RECORD_PLISTS) < 4096 and len(shape) <= _SHAPE_KEYS and _small(shape):
                _RECORD_PLISTS[shape] = lists
        if lists:
            plist, allowed = lists
            if _compiled is not None:
                try:
                    return _compiled.hash_kept(record, plist, allowed)
                except (_compiled.Slow, RecursionError):
                    return record_hash(record)
            try:
                body = _orjson.dumps(_fast_keep(record, plist, allowed, None, None))
            except (_Slow, RecursionError, _orjson.JSONEncodeError):
                pass
            else:
                return "sha256:" + hashlib.sha256(body).hexdigest()
    return record_hash(record)


# --- the reference chain, compiled ----------------------------------------------------------

#: per entry kind, in the compiled module's order (invoke, tool_call, tool_result,
#: decision_record): its allow-list, as a set, and the pieces of its canonical bytes (the
#: constant bytes before each kept value, with the pointer that value is written at)
_KINDS = (
    (
        _PLISTS["invoke"],
        _ALLOWED["invoke"],
        tuple(
            (before, None if key is None else _WHERE["invoke"][key])
            for key, before in _HEAD_LAYOUT["invoke"]
        ),
    ),
    *(
        (plist, allowed, ((head, at), (tail, None)))
        for _key, _kind, _step, plist, allowed, at, head, tail in _TOOL_PARTS
    ),
    (
        _PLISTS["decision_record"],
        _ALLOWED["decision_record"],
        tuple(
            (before, None if key is None else _WHERE["decision_record"][key])
            for key, before in _HEAD_LAYOUT["decision_record"]
        ),
    ),
)
#: envelopes per compiled call when the trace is spooled or progress is reported
_RUN = 500

if _compiled is not None:
    _compiled.configure(_js_number, _pointer_part, hashlib.sha256, _KINDS)


def _envelope_runs(envelopes: Envelopes, whole: bool) -> Any:
    """(index of the first, a list of envelopes), at least one (maybe empty): the held list
    at once when ``whole``, else runs of ``_RUN`` (a spooled trace read back as it goes)."""
    held = envelopes.in_memory() if whole else None
    return _runs(envelopes) if held is None else ((0, held),)


def _runs(envelopes: Envelopes) -> Iterator[tuple[int, list[Any]]]:
    run: list[Any] = []
    first = 0
    for env in envelopes:
        run.append(env)
        if len(run) == _RUN:
            yield first, run
            first += _RUN
            run = []
    if run or not first:
        yield first, run


def _entry_at(trace: ContextosTrace, run: list[Any], offset: int, position: int) -> Entry:
    """The chain entry at ``position`` of a run (0: the invoke, 1 + 2*i and 2 + 2*i: the
    run's envelope i, 1 + 2*len(run): the record), as :func:`entries` builds it."""
    head = trace.head
    if position == 0:
        return next(entries(trace))
    if position == 1 + 2 * len(run):
        return Entry(
            1 + 2 * (offset + len(run)),  # entries.length when the record's entry is pushed
            "decision_record",
            {"kind": "decision_record", "dr": head["decision_record"]},
            head["audit"]["chain_prev_hash"],
        )
    key, kind, step = _TOOL_PARTS[(position - 1) % 2][:3]
    body = run[(position - 1) // 2][key]
    return Entry(
        offset + (position - 1) // 2 + step,
        kind,
        {"kind": kind, key: body},
        _recorded(body.get("payload_hash")),
    )


def _verify_chain_compiled(
    trace: ContextosTrace,
    unprotected: set[str] | None,
    progress: Callable[[int], None] | None,
) -> ChainResult:
    """:func:`verify_chain` under the reference rule by the compiled loop: the same result and
    the same unprotected pointers as the Python loop (the tests hold them to it); an entry the
    compiled writer hands back is the exact writer's. Pointers are collected only for
    ``unprotected``."""
    # an empty set collects in place; else a set of its own, added at the end
    sink = unprotected if unprotected is not None and not unprotected else None
    if unprotected and sink is None:
        sink = set()
    head = trace.head
    invoke, record = head["invoke"], head["decision_record"]
    context, request, envelope_hash = (
        invoke["run_context"],
        invoke["request"],
        invoke["envelope_hash"],
    )
    record_prev = head["audit"]["chain_prev_hash"]
    # the pointers below each level, spelt once (bounded in C), for this trace only: one
    # cache serves every kind, as each kind's pointers start where no other kind's do
    pointers: dict[Any, Any] = {}
    total = len(trace.envelopes)
    prev = b""
    done = 0
    result = None
    for offset, run in _envelope_runs(trace.envelopes, progress is None):
        position = 0 if offset == 0 else 1
        stop = 2 * len(run) + (2 if offset + len(run) == total else 1)
        while position < stop and result is None:
            state, position, prev, count, computed, recorded = _compiled.chain(
                context,
                request,
                envelope_hash,
                run,
                record,
                record_prev,
                position,
                stop,
                prev,
                sink,
                MAX_UNPROTECTED,
                None if sink is None else pointers,
            )
            done += count
            if state == 0:
                break
            if state == 3:  # enough to say: stop collecting (bounded memory)
                if sink is not None and sink is not unprotected:
                    unprotected.update(sink)  # type: ignore[union-attr]
                sink = None
                continue
            entry = _entry_at(trace, run, offset, position)
            if state == 1:
                result = ChainResult(
                    REFERENCE, False, done, entry.idx, entry.kind, computed, recorded
                )
                break
            # state 2: this entry is the exact writer's
            try:
                body = _exact_reference_bytes(entry, _Full() if sink is None else sink)
            except (CanonicalError, RecursionError) as exc:
                result = ChainResult(
                    REFERENCE, False, done, entry.idx, entry.kind, None, entry.recorded, str(exc)
                )
                break
            hashed = "sha256:" + hashlib.sha256(prev + body).hexdigest()
            if hashed != entry.recorded:
                result = ChainResult(
                    REFERENCE, False, done, entry.idx, entry.kind, hashed, entry.recorded
                )
                break
            prev = hashed.encode()
            done += 1
            position += 1
            if sink is not None and len(sink) > MAX_UNPROTECTED:
                if sink is not unprotected:
                    unprotected.update(sink)  # type: ignore[union-attr]
                sink = None
        if result is not None:
            break
        if progress is not None:
            progress(done)
    if sink is not None and sink is not unprotected:
        unprotected.update(sink)  # type: ignore[union-attr]
    return result or ChainResult(REFERENCE, True, done)
