"""Decompression and expansion bombs: each refused early, with the limit in the message,
nothing stored, and the memory it took measured (peak RSS of a fresh process, below the
bound each test states).

The measuring runs in a subprocess (`python -c` with Django set up) so that one test's peak
does not hide another's; `ru_maxrss` of the child is its peak resident set."""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import js_sorted
from core.errors import ReplayError
from core.formats.jsonstrict import check_key_count
from core.formats.yaml12 import MAX_ALIAS_EXPANSION, YAML12Error, load

ROOT = Path(__file__).resolve().parents[2]
MB = 1024**2


def yaml_laughs(anchor_chars: int, aliases: int) -> str:
    """One large anchored scalar list, aliased `aliases` times (within yaml v2's alias
    count, each alias a single resolution)."""
    items = "\n".join(f"  - {'x' * 1000}" for _ in range(anchor_chars // 1000))
    refs = "\n".join(f"k{i}: *big" for i in range(aliases))
    return f"big: &big\n{items}\n{refs}\n"


def test_it_refuses_yaml_aliases_that_expand_past_the_limit():
    text = yaml_laughs(anchor_chars=200_000, aliases=50)  # ~10 MB once expanded

    with pytest.raises(YAML12Error) as refused:
        load(text)

    assert str(refused.value) == (
        "aliases expand the document by more than "
        f"{MAX_ALIAS_EXPANSION} nodes and characters (a billion-laughs attack); refused"
    )


def test_it_still_reads_aliases_that_expand_a_little():
    value = load(yaml_laughs(anchor_chars=10_000, aliases=50))  # ~0.5 MB once expanded
    assert len(value) == 51
    assert len(js_sorted(value)) > 500_000


# --- measured in a fresh process --------------------------------------------------------------

_MEASURE = textwrap.dedent(
    """
    import json, resource, sys, time
    from pathlib import Path
    from core.errors import ReplayError
    from core.formats import native

    def hwm_kib():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    path = Path(sys.argv[1])
    kind = sys.argv[2]
    before = hwm_kib()
    t0 = time.perf_counter()
    out = {"code": None, "message": None}
    try:
        if kind == "yaml":
            from core.formats import ahd
            from core.formats.yaml12 import YAML12Error
            try:
                ahd.hash_structured(path.read_text())
            except YAML12Error as exc:
                out["code"], out["message"] = "YAML", str(exc)
        else:
            with path.open("rb") as fh:
                trace = native.open_native(fh, path.name)
                for _ in trace.records():
                    pass
    except ReplayError as exc:
        out["code"], out["message"] = exc.code, exc.message
    out["seconds"] = time.perf_counter() - t0
    out["baseline_mib"] = before / 1024
    out["peak_mib"] = hwm_kib() / 1024
    print(json.dumps(out))
    """
)


def measured(path: Path, kind: str = "trace", timeout: float = 120) -> dict:
    """Open `path` as the server does in a fresh process; its refusal, seconds and memory
    (`peak_mib` the process's peak RSS, `baseline_mib` the peak before reading)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), kind],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    result["growth_mib"] = result["peak_mib"] - result["baseline_mib"]
    # ru_maxrss of the child agrees with /proc: the peak is the whole process's
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 >= result["peak_mib"]
    return result


def header_line() -> bytes:
    from tests.replay.helpers import golden

    doc = json.loads(golden("ok.trace.jsonl").read_bytes().split(b"\n", 1)[0])
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def gzip_members(path: Path, prefix: bytes, filler: bytes, total: int) -> Path:
    """`prefix` then `total` bytes of `filler`, as concatenated gzip members (one member of
    16 MiB repeated: a 1 GiB bomb is written in a moment)."""
    member = gzip.compress(filler * (16 * MB // len(filler)), compresslevel=9, mtime=0)
    with path.open("wb") as fh:
        fh.write(gzip.compress(prefix, mtime=0))
        for _ in range(total // (16 * MB)):
            fh.write(member)
    return path


def test_a_gzip_of_1_gib_of_newlines_is_refused_at_once_in_little_memory(tmp_path):
    path = gzip_members(tmp_path / "newlines.trace.jsonl.gz", header_line(), b"\n", 1024 * MB)
    assert path.stat().st_size < 2 * MB

    result = measured(path)

    assert result["code"] == "MALFORMED_TRACE"
    assert result["message"] == (
        "line 1026: more than 1024 blank lines; refused (padding, not records)"
    )
    assert result["seconds"] < 5
    assert result["growth_mib"] < 16


def test_a_small_json_gz_that_inflates_to_256_mib_is_refused_at_the_ratio_limit(tmp_path):
    prefix = b'{"format": "replay-trace", "schema_version": 1, "meta": {"pad": "'
    path = gzip_members(tmp_path / "inflate.trace.json.gz", prefix, b" ", 256 * MB)
    assert path.stat().st_size < 512 * 1024

    result = measured(path)

    assert result["code"] == "MALFORMED_TRACE"
    assert result["message"].startswith(
        "inflate.trace.json.gz: decompresses to more than 200 times its compressed size ("
    )
    assert result["message"].endswith(", past the first 33554432); refused as a gzip bomb")
    assert result["growth_mib"] < 2 * 32  # the 32 MiB read before the ratio applies, once


def test_two_million_keys_in_meta_are_refused_before_parsing(tmp_path):
    keys = b",".join(b'"k%d":0' % i for i in range(2_000_000))
    path = tmp_path / "keys.trace.json"
    path.write_bytes(b'{"format":"replay-trace","schema_version":1,"meta":{' + keys + b"}}")
    size_mib = path.stat().st_size / MB

    result = measured(path)

    assert result["code"] == "MALFORMED_TRACE"
    assert result["message"] == (
        "trace: an object has more than 100000 keys; refused before parsing it"
    )
    assert result["growth_mib"] < 3 * size_mib  # the text read once and decoded, no objects


def test_two_million_keys_in_one_json_lines_record_are_refused_before_parsing(tmp_path):
    keys = b",".join(b'"k%d":0' % i for i in range(2_000_000))
    path = tmp_path / "keys.trace.jsonl"
    path.write_bytes(header_line() + b'{"record":"event","payload":{' + keys + b"}}\n")
    size_mib = path.stat().st_size / MB

    result = measured(path)

    assert result["code"] == "MALFORMED_TRACE"
    assert result["message"] == (
        "line 2: an object has more than 100000 keys; refused before parsing it"
    )
    assert result["growth_mib"] < 3 * size_mib


def test_yaml_aliases_over_a_large_anchor_are_refused_in_little_memory(tmp_path):
    path = tmp_path / "laughs.yml"
    path.write_text(yaml_laughs(anchor_chars=2_000_000, aliases=99))  # ~200 MB expanded

    result = measured(path, "yaml")

    assert result["code"] == "YAML"
    assert result["message"].startswith("aliases expand the document by more than 4000000 ")
    assert result["growth_mib"] < 64


# --- the key count agrees with the parsed value ----------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\:{}[], \n\u00e9'),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet='ab"\\:{} \u00e9', max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


def _counts(value) -> tuple[int, int]:
    """(keys in all, most keys in one object) of a parsed value."""
    if isinstance(value, dict):
        inner = [_counts(v) for v in value.values()]
        return (
            len(value) + sum(t for t, _ in inner),
            max([len(value), *(m for _, m in inner)]),
        )
    if isinstance(value, list):
        inner = [_counts(v) for v in value]
        return sum(t for t, _ in inner), max([0, *(m for _, m in inner)])
    return 0, 0


@settings(max_examples=300, deadline=None, database=None)
@given(_json_values, st.booleans())
def test_the_key_count_is_the_parsed_values_whatever_the_strings_hold(value, spaced):
    data = json.dumps(value, indent=1 if spaced else None, ensure_ascii=False).encode()
    total, most = _counts(value)
    # exactly at the limits: accepted (whatever the colons in strings)
    check_key_count(data, where="t", max_keys=total, max_object_keys=most)
    if most:
        with pytest.raises(ReplayError, match="an object has more than"):
            check_key_count(data, where="t", max_keys=total, max_object_keys=most - 1)
        with pytest.raises(ReplayError, match="keys in all"):
            check_key_count(data, where="t", max_keys=total - 1, max_object_keys=most)
