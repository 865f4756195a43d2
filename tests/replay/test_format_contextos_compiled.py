"""The compiled reference chain (core/formats/contextos/_compiled.c) against the Python
writers it stands in for: the same bytes, the same left-out pointers, the same chain results
(ok, verified count, broke_at, kind, both hashes), on any JSON, tampered or not, held or
spooled, collecting pointers past the bound or not. The Python side is the exact writer and
the Python loop of ``verify_chain`` (taken when the module is not built)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import CanonicalError
from core.canonical import contextos as contextos_canonical
from core.formats import contextos as cx
from core.formats.contextos import chain as cx_chain
from core.formats.contextos import reader as cx_reader
from tests.replay.test_format_contextos import EXPECTED, FAST_JSON, HERE, KEYS, STRINGS

compiled = cx_chain._compiled
KIND_ORDER = ("invoke", "tool_call", "tool_result", "decision_record")
ROOT = Path(__file__).resolve().parents[2]
#: the property tests' examples are divided by this (the AddressSanitizer run below: ~10x
#: slower per example, it runs a tenth of them, within CI's minute)
DIVISOR = max(1, int(os.environ.get("REPLAY_EXAMPLES_DIVISOR", "1")))


def examples(n: int) -> int:
    return max(10, n // DIVISOR)


def test_the_compiled_chain_is_built():
    # `make .venv/.installed` (pip install -e .) builds it; without it every test below
    # would compare the Python writers with themselves
    assert compiled is not None, "core.formats.contextos._compiled is not built"


def python_chain(trace: cx.ContextosTrace, **kw: Any) -> cx.ChainResult:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cx_chain, "_compiled", None)
        return cx.verify_chain(trace, cx.REFERENCE, **kw)


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(map(has_surrogate, value))
    return False


def compiled_entry_bytes(kind: str, values: list[Any], sink: set[str]) -> bytes:
    plist, allowed, pieces = cx_chain._KINDS[KIND_ORDER.index(kind)]
    out, given_values = [], iter(values)
    for before, at in pieces:
        out.append(before)
        if at is not None:
            out.append(compiled.write_kept(next(given_values), plist, allowed, at, sink, {}))
    return b"".join(out)


@settings(max_examples=examples(400), deadline=None, database=None)
@given(kind=st.sampled_from(KIND_ORDER), a=FAST_JSON, b=FAST_JSON)
def test_the_compiled_writer_writes_the_exact_writers_bytes_and_pointers(kind, a, b):
    names = [k for k in cx._PLISTS[kind] if k != "kind"]
    values = [a, b][: len(names)]
    entry = cx.Entry(0, kind, {"kind": kind, **dict(zip(names, values, strict=True))}, "")
    exact: set[str] = set()
    want = cx._exact_reference_bytes(entry, exact)
    got: set[str] = set()
    try:
        assert compiled_entry_bytes(kind, values, got) == want
    except compiled.Slow:
        assert has_surrogate(values)  # the only thing it hands back for parsed JSON
        return
    assert got == exact
    # and without collecting: the same bytes
    plist, allowed, _ = cx_chain._KINDS[KIND_ORDER.index(kind)]
    assert compiled.write_kept(a, plist, allowed, None, None, None) == (
        compiled.write_kept(a, plist, allowed, "/x", set(), {})
    )


@settings(max_examples=examples(300), deadline=None, database=None)
@given(record=st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=8))
def test_the_compiled_record_hash_is_the_seeds(record):
    plist = tuple(sorted(record))
    if "__proto__" in record or not all(k.isascii() for k in plist):
        return  # never asked: the exact writer decides (JS's key order, __proto__)
    try:
        got = compiled.hash_kept(record, plist, frozenset(plist))
    except compiled.Slow:
        assert has_surrogate(record)
        return
    want = "sha256:" + hashlib.sha256(contextos_canonical(record)).hexdigest()
    assert got == want == cx.record_hash(record)


# --- whole chains: sealed as the seed seals them, then tampered --------------------------------

ENVELOPE_PART = st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=4)


def seal(doc: dict[str, Any]) -> None:
    """Every recorded hash as the seed's verify-chain.ts computes it, by the profile's own
    writer (payload_hash is never an allow-listed key: storing it changes no hash)."""
    prev = ""

    def link(payload: dict[str, Any]) -> str:
        nonlocal prev
        prev = "sha256:" + hashlib.sha256(prev.encode() + contextos_canonical(payload)).hexdigest()
        return prev

    invoke = doc["invoke"]
    invoke["envelope_hash"] = link(
        {"kind": "invoke", "ctx": invoke["run_context"], "req": invoke["request"]}
    )
    for env in doc["tool_envelopes"]:
        for key, kind in (("call", "tool_call"), ("result", "tool_result")):
            env[key]["payload_hash"] = link({"kind": kind, key: env[key]})
    doc["audit"]["chain_prev_hash"] = link(
        {"kind": "decision_record", "dr": doc["decision_record"]}
    )


@st.composite
def traces(draw) -> dict[str, Any]:
    envelopes = [
        {
            "call": {"call_id": f"c-{i}", **draw(ENVELOPE_PART)},
            "result": {"call_id": f"c-{i}", **draw(ENVELOPE_PART)},
        }
        for i in range(draw(st.integers(0, 5)))
    ]
    for env in envelopes:
        for part in ("call", "result"):
            env[part].pop("payload_hash", None)
    record = {field: draw(FAST_JSON.filter(lambda v: v is not None)) for field in cx.RECORD_FIELDS}
    record.update(draw(ENVELOPE_PART))
    doc = {
        "trace_id": "t" * 32,
        "pack_version": "refund-triage@1.4.0",
        "kg_snapshot_id": "sha256:" + "0" * 64,
        "invoke": {
            "run_context": draw(st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=5)),
            "request": draw(st.dictionaries(KEYS | STRINGS, FAST_JSON, max_size=5)),
            "envelope_hash": "",
        },
        "tool_envelopes": envelopes,
        "decision_record": record,
        "audit": {"chain_root_hash": "", "signed_by": "k", "chain_prev_hash": ""},
    }
    seal(doc)
    positions = 2 + 2 * len(envelopes)
    tamper = draw(st.none() | st.integers(0, positions - 1))
    if tamper is not None:
        how = draw(st.sampled_from(["hash", "drop", "value"]))
        if tamper == 0:
            holder, key = doc["invoke"], "envelope_hash"
        elif tamper == positions - 1:
            holder, key = doc["audit"], "chain_prev_hash"
        else:
            env = envelopes[(tamper - 1) // 2]
            holder, key = env["call" if tamper % 2 else "result"], "payload_hash"
        if how == "hash":
            holder[key] = "sha256:" + "f" * 64
        elif how == "drop" and key == "payload_hash":
            del holder[key]
        else:  # a value the reference rule hashes (a kind) or does not
            target = doc["invoke"]["request"] if tamper == 0 else doc["decision_record"]
            target["kind"] = draw(FAST_JSON)
    return doc


def both(doc: dict[str, Any], **kw: Any) -> tuple[Any, Any]:
    trace = cx.loads(json.dumps(doc).encode(), "t.json")
    got_u: set[str] = set()
    want_u: set[str] = set()
    got = cx.verify_chain(trace, cx.REFERENCE, unprotected=got_u, **kw)
    want = python_chain(trace, unprotected=want_u, **kw)
    return (got, got_u), (want, want_u)


@settings(max_examples=examples(300), deadline=None, database=None)
@given(doc=traces())
def test_the_compiled_chain_gives_the_python_loops_result_and_pointers(doc):
    try:
        json.dumps(doc).encode()
    except UnicodeEncodeError:
        return  # a lone surrogate cannot be written as a file
    try:
        got, want = both(doc)
    except cx.ReplayError:
        return  # the reader refuses it (a lone surrogate): nothing to verify
    assert got == want


@settings(max_examples=examples(150), deadline=None, database=None)
@given(doc=traces(), bound=st.integers(0, 8), run=st.integers(1, 3))
def test_runs_progress_and_the_pointer_bound_change_nothing(doc, bound, run):
    try:
        data = json.dumps(doc).encode()
        trace = cx.loads(data, "t.json")
    except (UnicodeEncodeError, cx.ReplayError):
        return
    seen: list[int] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cx_chain, "MAX_UNPROTECTED", bound)
        mp.setattr(cx_chain, "_RUN", run)
        got_u: set[str] = set()
        got = cx.verify_chain(trace, cx.REFERENCE, unprotected=got_u, progress=seen.append)
        want_u: set[str] = set()
        want = python_chain(trace, unprotected=want_u)
        held_u: set[str] = set()
        held = cx.verify_chain(trace, cx.REFERENCE, unprotected=held_u)
    assert got == want == held
    assert got_u == want_u == held_u
    assert seen == sorted(seen)
    if got.ok:
        assert seen[-1] == got.verified  # the last run's count is the whole chain's


def test_a_spooled_trace_is_verified_run_by_run(monkeypatch):
    monkeypatch.setattr(cx_reader, "SMALL_DOCUMENT_BYTES", 0)
    monkeypatch.setattr(cx_reader, "SPOOL_AFTER_BYTES", 10)
    monkeypatch.setattr(cx_chain, "_RUN", 1)
    checked = 0
    for name in sorted(EXPECTED):  # every fixture the seed's code gave a verdict for
        data = (HERE / name).read_bytes()
        try:
            trace = cx.parse(io.BytesIO(data), name)
        except cx.ReplayError:
            assert name == "version_2.trace.json"  # newer than the console reads
            continue
        checked += 1
        assert trace.envelopes._spool is not None
        got_u: set[str] = set()
        want_u: set[str] = set()
        got = cx.verify_chain(trace, cx.REFERENCE, unprotected=got_u)
        assert got == python_chain(trace, unprotected=want_u)
        assert got_u == want_u
        assert got.verdict() == EXPECTED[name]["reference"]
    assert checked == len(EXPECTED) - 1


@pytest.mark.parametrize(
    "value",
    [
        1.5,
        1e21,
        -0.0,
        2**53 + 1,
        -(2**70),
        "\ud800",
        'caf\u00e9 \u2028 \x00 \x1f \x7f "q" \\',
        '\x00"\\\n\u00e9' * 200_000,  # every kind of escape, a megabyte of them
        {"kind": [1, {"kind": 2.5}]},
    ],
)
def test_what_the_compiled_writer_hands_back_or_calls_out_for_is_written_exactly(value):
    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["tool_envelopes"][0]["call"]["kind"] = value
    trace = cx.loads(json.dumps(doc).encode(), "t.json") if value != "\ud800" else None
    if trace is None:  # the reader refuses a lone surrogate; give it to the chain directly
        trace = cx.loads((HERE / "pass.trace.json").read_bytes(), "t.json")
        trace.envelopes._items[0]["call"]["kind"] = value
    got_u: set[str] = set()
    want_u: set[str] = set()
    got = cx.verify_chain(trace, cx.REFERENCE, unprotected=got_u)
    assert got == python_chain(trace, unprotected=want_u)
    assert got_u == want_u
    assert (got.ok, got.broke_at, got.kind) == (False, 1, "tool_call")


def test_a_value_json_has_no_name_for_is_the_exact_writers_refusal():
    trace = cx.loads((HERE / "pass.trace.json").read_bytes(), "t.json")
    trace.envelopes._items[1]["result"]["kind"] = {1, 2}
    got = cx.verify_chain(trace, cx.REFERENCE, unprotected=set())
    assert got == python_chain(trace, unprotected=set())
    assert (got.ok, got.broke_at, got.problem) == (False, 2.5, "set is not a JSON value")
    with pytest.raises(CanonicalError):
        cx._exact_reference_bytes(
            cx.Entry(0, "tool_call", {"kind": "tool_call", "call": {"kind": b"x"}}, ""), set()
        )


def test_the_compiled_functions_refuse_wrong_arguments_without_crashing():
    plist, allowed, _ = cx_chain._KINDS[1]
    with pytest.raises(TypeError, match="the allow-list: a tuple and a frozenset"):
        compiled.write_kept({}, list(plist), allowed, None, None, None)
    with pytest.raises(TypeError, match="the allow-list holds strings"):
        compiled.write_kept({}, (1,), allowed, None, None, None)
    with pytest.raises(TypeError, match="sink: a set and cache: a dict, or both None"):
        compiled.write_kept({}, plist, allowed, "/x", set(), None)
    with pytest.raises(TypeError, match="at: a str with a sink, None without"):
        compiled.write_kept({}, plist, allowed, None, set(), {})
    with pytest.raises(ValueError, match='prev: b"" or a sha256: hash'):
        compiled.chain({}, {}, "", [], {}, "", 0, 2, b"short", None, 0, None)
    with pytest.raises(TypeError, match="chain takes 12 arguments"):
        compiled.chain()
    with pytest.raises(TypeError, match="configure: four kinds"):
        compiled.configure(len, len, len, ())


@pytest.mark.parametrize("openssl", [True, False])
def test_the_module_builds_without_warnings_and_hashes_alike_with_or_without_openssl(
    tmp_path, openssl
):
    import importlib.util
    import shutil
    import subprocess
    import sysconfig

    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler builds the module at install; the tests build it the same way"
    source = Path(cx_chain.__file__).with_name("_compiled.c")
    target = tmp_path / ("_compiled" + sysconfig.get_config_var("EXT_SUFFIX"))
    flags = ["-DHAVE_OPENSSL_SHA=1", "-lcrypto"] if openssl else []
    done = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror",
         f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target), *flags],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec = importlib.util.spec_from_file_location("_compiled", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert int(openssl) == module.OPENSSL_SHA256
    with pytest.raises(RuntimeError, match="configure\\(\\) first"):
        module.hash_kept({}, (), frozenset())
    module.configure(cx_chain._js_number, cx_chain._pointer_part, hashlib.sha256, cx_chain._KINDS)
    for name in sorted(EXPECTED):
        try:
            trace = cx.loads((HERE / name).read_bytes(), name)
        except cx.ReplayError:
            continue
        head = trace.head
        args = (
            head["invoke"]["run_context"], head["invoke"]["request"],
            head["invoke"]["envelope_hash"], trace.envelopes.in_memory(),
            head["decision_record"], head["audit"]["chain_prev_hash"],
            0, 10**9, b"", set(), 200, {},
        )  # fmt: skip
        assert module.chain(*args) == compiled.chain(*args)
        record = head["decision_record"]
        plist = tuple(sorted(record))
        assert module.hash_kept(record, plist, frozenset(plist)) == EXPECTED[name]["record_hash"]


@settings(max_examples=examples(300), deadline=None, database=None)
@given(value=FAST_JSON, limit=st.integers(0, 8), depth=st.integers(1, 4))
def test_the_compiled_nesting_walk_is_jsonstricts(value, limit, depth):
    from core.formats.jsonstrict import deeper_than

    assert compiled.deeper_than(value, limit, depth) is deeper_than(value, limit, depth)


def test_the_compiled_nesting_walk_stops_at_its_limit():
    nested: Any = []
    for _ in range(100_000):  # deeper than any C stack would follow
        nested = [nested]
    assert compiled.deeper_than(nested, 64, 1) is True
    assert compiled.deeper_than([[[]]], 3, 1) is False
    assert compiled.deeper_than([[[]]], 2, 1) is True
    assert compiled.deeper_than({"a": {"b": 1}}, 2, 1) is False
    assert compiled.deeper_than("a string", 0, 1) is False
    with pytest.raises(ValueError, match="0 <= limit <= 1000"):
        compiled.deeper_than([], 1001, 1)


# --- values taken away while they are written (issue 20: a use-after-free) -----------------


def _reconfigured(js_number=None, pointer_part=None):
    """The module configured with other callbacks (restored by the caller)."""
    compiled.configure(
        js_number or cx_chain._js_number,
        pointer_part or cx_chain._pointer_part,
        hashlib.sha256,
        cx_chain._KINDS,
    )


@pytest.fixture
def restored():
    yield
    _reconfigured()


def test_a_value_its_object_drops_while_it_is_written_is_held_until_written(restored):
    # write_dict wrote a value it held no reference to: the number inside it calls Python
    # (js_number), which here takes that value out of its object, its only other holder
    # (a list: its items are freed memory when it goes, which AddressSanitizer watches)
    plist, allowed, _ = cx_chain._KINDS[1]  # ("call", "kind")
    outer = {"kind": [1.5, "after", {"call": {"kind": 1}}]}

    def js_number(value):
        outer.pop("kind", None)
        return cx_chain._js_number(value)

    _reconfigured(js_number=js_number)
    written = compiled.write_kept(outer, plist, allowed, None, None, None)
    assert written == b'{"kind":[1.5,"after",{"call":{"kind":1}}]}'
    assert outer == {}


def test_a_key_and_a_cache_level_emptied_while_a_pointer_is_spelt_are_held(restored):
    plist, allowed, _ = cx_chain._KINDS[1]
    cache: dict = {}
    value = {"left out " + "x" * 40: 1, "call": {"also left out": 2}}

    def pointer_part(key):
        cache.clear()  # the level below() looked up, and was about to fill
        value.clear()  # the key being spelt
        return cx_chain._pointer_part(key)

    _reconfigured(pointer_part=pointer_part)
    sink: set[str] = set()
    assert compiled.write_kept(value, plist, allowed, "/x", sink, cache) == b"{}"
    assert sink == {"/x/left out " + "x" * 40}


def test_envelopes_taken_away_while_the_chain_runs_hand_the_entry_back(restored):
    trace = cx.loads((HERE / "pass.trace.json").read_bytes(), "t.json")
    envelopes = trace.envelopes.in_memory()
    call = envelopes[0]["call"]
    call["kind"] = 2.5  # a number: js_number runs while entry 1 is written
    call["payload_hash"] = python_chain(trace).expected  # and entry 1 verifies
    head = trace.head

    def js_number(value):
        envelopes.clear()  # the list the loop reads entry 2 from
        return cx_chain._js_number(value)

    _reconfigured(js_number=js_number)
    state, position, _prev, done, *_ = compiled.chain(
        head["invoke"]["run_context"], head["invoke"]["request"],
        head["invoke"]["envelope_hash"], envelopes, head["decision_record"],
        head["audit"]["chain_prev_hash"], 0, 10**9, b"", None, 200, None,
    )  # fmt: skip
    assert (state, position, done) == (2, 2, 2)  # handed back: the Python loop decides


def test_one_entry_never_grows_the_sink_past_the_bound():
    # 4096 left-out keys in one tool call: the sink stops one past the bound, as the Python
    # writers stop (it once took every one, each pointer as long as the nesting)
    doc = json.loads((HERE / "pass.trace.json").read_text())
    doc["tool_envelopes"][0]["call"]["call"] = {f"k{i}": {"k": i} for i in range(4096)}
    trace = cx.loads(json.dumps(doc).encode(), "t.json")
    got: set[str] = set()
    result = cx.verify_chain(trace, cx.REFERENCE, unprotected=got)
    want: set[str] = set()
    assert result == python_chain(trace, unprotected=want)
    assert got == want
    assert len(got) == cx_chain.MAX_UNPROTECTED + 1


def test_the_caches_live_for_one_trace_or_hold_only_small_shapes():
    assert not hasattr(cx_chain, "_POINTERS")  # once a module global, never emptied
    doc = json.loads((HERE / "pass.trace.json").read_text())
    wide = {f"key {i} " + "x" * 100: {"call": i} for i in range(40)}
    long_keys = {"y" * 300: 1, "call": {"z" * 300: 2}}
    doc["tool_envelopes"][0]["call"]["call"] = [wide, long_keys, {"call": {"k": 1}}]
    trace = cx.loads(json.dumps(doc).encode(), "t.json")
    for compiled_or_not in (compiled, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cx_chain, "_compiled", compiled_or_not)
            cx.verify_chain(trace, cx.REFERENCE, unprotected=set())
    shapes = [
        *((at, keys) for _plist, at, keys in cx_chain._PLANS),
        *cx_chain._DROPPED,
        *((None, keys) for keys in cx_chain._RECORD_PLISTS),
    ]
    assert ("/tool_envelopes/*/call/call/*/call", ("k",)) in shapes  # small ones are kept
    for at, keys in shapes:
        assert len(keys) <= 32, keys
        assert sum(map(len, keys)) <= 256, keys
        assert at is None or len(at) <= 256
    assert max(map(len, (cx_chain._PLANS, cx_chain._DROPPED, cx_chain._RECORD_PLISTS))) <= 4096


def test_the_compiled_tests_pass_under_address_sanitizer(tmp_path):
    """The module built with -fsanitize=address, put in place of the installed one (a
    plugin puts it in sys.modules first), and this file's tests run against it in a fresh
    interpreter with libasan preloaded and Python's allocator off (PYTHONMALLOC=malloc, so
    that a freed object is freed memory ASan watches). CI runs this file."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler builds the module at install; the tests build it the same way"
    libasan = subprocess.run(
        [gcc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert os.path.isabs(libasan), "libasan is not installed (Debian: libasan8, with gcc)"
    source = Path(cx_chain.__file__).with_name("_compiled.c")
    target = tmp_path / ("_compiled_asan" + sysconfig.get_config_var("EXT_SUFFIX"))
    done = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer",
         "-DHAVE_OPENSSL_SHA=1", f"-I{sysconfig.get_paths()['include']}", str(source),
         "-o", str(target), "-lcrypto"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (tmp_path / "asan_compiled.py").write_text(
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('_compiled', {str(target)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "sys.modules['core.formats.contextos._compiled'] = module\n"
    )
    env = {
        **os.environ,
        "LD_PRELOAD": libasan,
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
        "PYTHONMALLOC": "malloc",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "REPLAY_EXAMPLES_DIVISOR": "10",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-p", "asan_compiled", str(Path(__file__)),
         "-k", "not address_sanitizer and not builds_without_warnings"],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=600,
    )  # fmt: skip
    assert "AddressSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert str(target) in (
        subprocess.run(
            [sys.executable, "-c", "import asan_compiled, core.formats.contextos.chain as c;"
             "print(c._compiled.__file__)"],
            capture_output=True, text=True, cwd=ROOT, env=env, check=True,
        ).stdout
    )  # fmt: skip
