"""The pure span scanner and rules: exact byte spans, escapes and all; cutting them out and
putting them back gives the same bytes."""

from __future__ import annotations

import json

import pytest

from core.privacy import crypto, rules
from core.privacy.spans import SpanError, jsonl_spans, pointer, string_spans

DOC = (
    b'{"a": {"name": "Karen Sp\\u00e4rck \\"KSJ\\" Jones", "n": 1.5e3, "ok": true},\n'
    b' "list": ["x", {"name": "caf\xc3\xa9"}], "a/b~c": "slash", "empty": ""}'
)


def test_every_string_value_has_its_exact_span_and_decoded_value():
    spans = string_spans(DOC, lambda _p: True)
    assert [(pointer(s.path), DOC[s.start : s.end], s.value) for s in spans] == [
        ("/a/name", b'Karen Sp\\u00e4rck \\"KSJ\\" Jones', 'Karen Spärck "KSJ" Jones'),
        ("/list/0", b"x", "x"),
        ("/list/1/name", b"caf\xc3\xa9", "café"),
        ("/a~1b~0c", b"slash", "slash"),
        ("/empty", b"", ""),
    ]


def test_only_wanted_paths_are_kept():
    spans = string_spans(DOC, lambda p: p[-1:] == ("name",))
    assert [pointer(s.path) for s in spans] == ["/a/name", "/list/1/name"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a": 1} x', "byte 9: trailing data after the JSON value"),
        (b'{"a" 1}', "byte 5: expected ':'"),
        (b'{"a": 1', "byte 7: expected ',' or '}'"),
        (b"[1 2]", "byte 3: expected ',' or ']'"),
        (b"{1: 2}", "byte 1: expected a string"),
        (b'{"a": nope}', "byte 6: unexpected b'n'"),
        (b"", "unexpected end of the text"),
    ],
)
def test_text_that_is_not_json_is_refused_with_where(text, message):
    with pytest.raises(SpanError) as caught:
        string_spans(text, lambda _p: True)
    assert str(caught.value) == message


def test_json_lines_spans_are_offsets_in_the_whole_text():
    text = b'{"k": "v1"}\n\n{"k": "v2", "skip": true}\r\n{"other": "v3"}\n'
    found = jsonl_spans(text, lambda obj: (lambda p: p == ("k",)) if "k" in obj else None)
    assert [(text[s.start : s.end], obj.get("skip")) for obj, s in found] == [
        (b"v1", None),
        (b"v2", True),
    ]


def test_a_json_lines_line_that_is_not_utf8_is_refused_with_where():
    # UnicodeDecodeError is a ValueError without JSON's ``msg``: it must still read as a refusal
    text = b'{"k": "v1"}\n{"k": "\xff"}\n'
    with pytest.raises(SpanError) as caught:
        jsonl_spans(text, lambda obj: None)
    assert str(caught.value).startswith("byte 12: a line is not JSON ('utf-8' codec can't decode")


def test_native_json_and_jsonl_give_the_same_fields():
    doc = {
        "format": "replay-trace",
        "snapshots": [],
        "events": [
            {"seq": 0, "payload": {"user": {"email": "A@x.org", "name": "A"}, "t": "q"}},
            {"seq": 1, "payload": {"user": {"name": "nobody named"}}},
            {"seq": 2, "payload": {"who": "b@x.org", "user": {"name": "B"}}},
        ],
    }
    policy = {"redact": ["/user/email", "/user/name"], "subject": ["/user/email", "/who"]}
    as_json = json.dumps(doc, indent=2).encode()
    lines = [json.dumps({k: v for k, v in doc.items() if k != "events"})]
    lines += [json.dumps({"record": "event", **e}) for e in doc["events"]]
    as_jsonl = ("\n".join(lines) + "\n").encode()
    for data, encoding in ((as_json, "json"), (as_jsonl, "jsonl")):
        found = rules.native_found(data, encoding, policy, ["/user/email"])
        assert [(f.identifier, f.location, f.path, f.value) for f in found] == [
            ("A@x.org", "event 0", "/user/email", "A@x.org"),
            ("A@x.org", "event 0", "/user/name", "A"),
            ("b@x.org", "event 2", "/who", "b@x.org"),
            ("b@x.org", "event 2", "/user/name", "B"),
        ]
        assert all(data[f.start : f.end].decode() == f.value for f in found)


def test_a_policy_without_subject_uses_the_default_and_a_bad_policy_yields_nothing():
    assert rules.native_pointers({"redact": ["/e"]}, ["/e"]) == (["/e"], ["/e"])
    assert rules.native_pointers({"redact": "/e"}, ["/e"]) == ([], [])
    assert rules.native_pointers({"redact": ["/e"], "subject": 3}, ["/e"]) == ([], [])
    assert rules.native_pointers(None, ["/e"]) == ([], [])


def test_path_rules_with_wildcards_and_masking():
    data = b'{"rows": [{"mail": "a@x", "n": "A"}, {"mail": "a@x", "n": "A2"}], "keep": "k"}'
    found = rules.ruled_found(data, ["/rows/0/mail"], ["/rows/*/n"])
    assert [(f.identifier, f.path, f.value) for f in found] == [
        ("a@x", "/rows/0/mail", "a@x"),
        ("a@x", "/rows/0/n", "A"),
        ("a@x", "/rows/1/n", "A2"),
    ]
    masked = rules.mask(json.loads(data), (), rules.patterns_of(["/rows/*/n"]), "[m]")
    assert masked == {
        "rows": [{"mail": "a@x", "n": "[m]"}, {"mail": "a@x", "n": "[m]"}],
        "keep": "k",
    }


def test_the_envelope_opens_only_under_its_key_and_row():
    key = crypto.new_key()
    nonce, ct = crypto.seal(key, b"Ada", b"value:1:10")
    assert crypto.open_sealed(key, nonce, ct, b"value:1:10") == b"Ada"
    with pytest.raises(crypto.EnvelopeError):
        crypto.open_sealed(key, nonce, ct, b"value:2:10")
    with pytest.raises(crypto.EnvelopeError):
        crypto.open_sealed(crypto.new_key(), nonce, ct, b"value:1:10")
    assert crypto.normalise("  Ada@X.org ") == "ada@x.org"
    assert crypto.normalise(" Customer 42 ") == "Customer 42"
    assert crypto.lookup_digest(b"s", "ADA@x.org") == crypto.lookup_digest(b"s", "ada@x.org")
    assert crypto.lookup_digest(b"s", "ada@x.org") != crypto.lookup_digest(b"t", "ada@x.org")


def _spliced(whole: bytes, spans: list[tuple[int, int]], expected: str | None, erase=()):
    import hashlib
    import io

    from core.privacy.splice import Spliced

    cut, pos, pieces = b"", 0, []
    for start, end in spans:
        cut += whole[pos:start]
        pieces.append((start, b"#" * (end - start) if start in erase else whole[start:end]))
        pos = end
    cut += whole[pos:]
    digest = hashlib.sha256(whole).hexdigest() if expected == "right" else expected
    return io.BufferedReader(Spliced(io.BytesIO(cut), pieces, len(whole), digest), 7)


WHOLE = b'{"a": "Ada Lovelace", "b": "x", "c": "ada@example.org"}\n{"d": "tail"}\n'
SPANS = [(7, 19), (28, 29), (38, 53)]


def test_a_spliced_file_reads_back_whole_in_any_chunk_size_and_checks_its_digest():
    assert _spliced(WHOLE, SPANS, "right").read() == WHOLE
    reader = _spliced(WHOLE, SPANS, "right")
    assert b"".join(iter(lambda: reader.read(3), b"")) == WHOLE
    assert _spliced(WHOLE, [(0, 1), (len(WHOLE) - 1, len(WHOLE))], "right").read() == WHOLE


def test_a_spliced_file_seeks_into_and_between_values():
    reader = _spliced(WHOLE, SPANS, "right")
    for at in (0, 7, 10, 19, 28, 29, 40, 53, len(WHOLE) - 3):
        reader.seek(at)
        assert reader.read(9) == WHOLE[at : at + 9], at
    assert reader.seek(0, 2) == len(WHOLE)


def test_a_spliced_file_that_does_not_match_its_digest_is_an_os_error():
    with pytest.raises(OSError, match="does not reassemble to its digest"):
        _spliced(WHOLE, SPANS, "0" * 64).read()


def test_an_erased_value_reads_as_its_marker_and_offsets_hold():
    data = _spliced(WHOLE, SPANS, None, erase={7}).read()
    assert data == WHOLE.replace(b"Ada Lovelace", b"#" * 12)
