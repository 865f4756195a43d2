"""AHD replay sidecars: the published sidecars verify clean, drift and refusals have their exact
code and message, the YAML 1.2 core loader agrees with npm `yaml` v2, and `verify` prints the
per-field ok / FAIL list and exits 0, 1 or 2.

The checkout is read from tests/fixtures/published/ahd/checkout (Ad-Astra-Computing/ahd at
f0ed5672ebb6: code FSL-1.1-Apache-2.0, tokens CC BY 4.0); edits happen on a copy in tmp_path.
Every YAML vector's expected JSON was produced by `yaml` 2.9.1 under Node with AHD's
canonicalizeJson + JSON.stringify.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.core.management import CommandError, call_command

from core.canonical import js_sorted
from core.errors import (
    INTEGRITY_FAILURE,
    MALFORMED_TRACE,
    MISSING_SNAPSHOT,
    UNSUPPORTED_SCHEMA_VERSION,
)
from core.formats import AHD, ahd, detect_format, format_names
from core.formats.yaml12 import (
    MAX_ALIAS_COUNT,
    MAX_BINARY_BYTES,
    YAML12Error,
    _node_base64,
    load,
)
from replay.services import trace_verify_file
from tests.published import PUBLISHED

FIXTURES = PUBLISHED
CHECKOUT = FIXTURES / "ahd" / "checkout"
EVALS = CHECKOUT / "docs" / "evals"
SWISS = "2026-04-21-swiss"
IMAGE = "2026-04-21-editorial-image"
SWISS_TOKEN = "sha256:380a3d833d9463dbc681df7465993ab6413d8e77188f55f97359f60dc4b746b1"
SWISS_BRIEF = "sha256:8b7d4275964399a91e6ddec525151ba672ed9c4721279a37ec16ab3450493a4c"


@pytest.fixture
def copy(tmp_path) -> Path:
    """A writable copy of the published checkout."""
    dst = tmp_path / "ahd"
    shutil.copytree(CHECKOUT, dst, copy_function=shutil.copyfile)
    for directory, _dirs, _files in os.walk(dst):
        Path(directory).chmod(0o755)
    return dst


def sidecar(root: Path, name: str = SWISS) -> dict[str, Any]:
    return json.loads((root / "docs" / "evals" / f"{name}.replay.json").read_bytes())


def write_sidecar(root: Path, doc: dict[str, Any], name: str = SWISS) -> Path:
    path = root / "docs" / "evals" / f"{name}.replay.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


def verify(path: Path, root: Path | None = None) -> dict[str, Any]:
    return ahd.verify_path(path, root=root).to_json()


def checks(report: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(c["name"], c["ok"]) for c in report["checks"]]


def detail(report: dict[str, Any], name: str) -> str:
    return next(c["detail"] for c in report["checks"] if c["name"] == name)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- the published sidecars -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        EVALS / f"{SWISS}.replay.json",
        EVALS / f"{SWISS}.md",
        EVALS / f"{IMAGE}.replay.json",
        EVALS / f"{IMAGE}.md",
    ],
    ids=lambda p: p.name,
)
def test_both_published_sidecars_verify_clean_from_the_sidecar_or_the_report(path):
    report = verify(path)

    assert report["status"] == "ok"
    assert report["error_code"] is None
    assert report["format"] == "ahd-replay"
    assert checks(report) == [("format", True), ("root", True), ("token", True), ("brief", True)]
    assert detail(report, "root") == (
        f"checkout root {CHECKOUT} (found by walking up to the package.json named "
        "@adastracomputing/ahd)"
    )


def test_the_swiss_report_names_its_hashes():
    report = verify(EVALS / f"{SWISS}.md")

    assert detail(report, "format") == (
        "AHD replay sidecar 2026-04-21-swiss.replay.json: schema_version 1, kind eval-live, "
        "ahd_version 0.1.0, ahd_commit 4813e2c5a429bde5fe19f2d11891af13fd325cc3, invoked_at "
        "2026-04-21T21:48:00.597Z, backfilled"
    )
    assert detail(report, "token") == (
        f"hash matches {SWISS_TOKEN} (canonical JSON of the parsed YAML)"
    )
    assert detail(report, "brief") == (
        f"hash matches {SWISS_BRIEF} (canonical JSON of the parsed YAML)"
    )
    assert report["unprotected_fields"] == list(ahd.UNPROTECTED_FIELDS)


@pytest.mark.parametrize(
    ("path", "recorded"),
    [
        ("tokens/swiss-editorial.yml", SWISS_TOKEN),
        ("briefs/landing.yml", SWISS_BRIEF),
        (
            "tokens/editorial-illustration.yml",
            "sha256:c2c79dec1b06fc45877d2b99be5c2a776aec12c226e0aeac38d384d698d9b721",
        ),
        (
            "briefs/editorial-illustration.yml",
            "sha256:ede77b5c41cf91ecac53272cf8d0e6c20ed5639ceb457c410a6cda03e7bca0f2",
        ),
    ],
)
def test_each_input_hashes_as_canonical_json_of_its_yaml(path, recorded):
    text = (CHECKOUT / path).read_text("utf-8")

    assert ahd.hash_structured(text) == recorded
    assert ahd.hash_raw(text) != recorded


# --- drift ------------------------------------------------------------------------------------


def test_an_edited_token_fails_with_both_hashes_and_exit_1(copy):
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text().replace("base: 17", "base: 18"))
    observed = ahd.hash_structured(token.read_text())

    report = verify(copy / "docs" / "evals" / f"{SWISS}.md")

    reason = "token contents have changed since the run; re-hash differs"
    assert report["status"] == "tamper_detected"
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == f"token: {reason}"
    assert report["broke_at"] == "token"
    assert (report["expected"], report["observed"]) == (SWISS_TOKEN, observed)
    # what yaml 2.9.1 under Node makes of the edited token
    assert observed == "sha256:a1169dbcf6488d1a436bb6322f9ed2e7678f5a7ca883b6739f82f8cf4e60d4d8"
    assert checks(report) == [("format", True), ("root", True), ("token", False), ("brief", True)]
    assert detail(report, "token") == f"{reason}; expected {SWISS_TOKEN}, actual {observed}"
    assert report["replayable"] is False


def test_comments_whitespace_and_key_order_do_not_count_as_drift(copy):
    token = copy / "tokens" / "swiss-editorial.yml"
    lines = token.read_text().splitlines(keepends=True)
    head, rest = lines[0], lines[1:]
    token.write_text("# a comment\n\n" + "".join(rest[:4]) + head + "".join(rest[4:]))

    assert verify(copy / "docs" / "evals" / f"{SWISS}.md")["status"] == "ok"


FAVICON = (
    "favicon: !!binary |\n"
    "  iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg==\n"
)
#: AHD's hashJsonCanonical of the swiss token with FAVICON appended, as yaml 2.9.1 parses it
#: under Node 20 (the favicon a 70-byte Uint8Array), run once
FAVICON_TOKEN = "sha256:33bac154f912576bee75046bbe81e33e64b8a05187fdeb67006e4dc29b1d8e3a"


def test_a_token_holding_a_binary_value_verifies_with_the_hash_yaml_v2_gives_it(copy):
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text() + FAVICON)
    doc = sidecar(copy)
    doc["token"]["hash"] = FAVICON_TOKEN
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert ahd.hash_structured(token.read_text()) == FAVICON_TOKEN
    assert (report["status"], report["error_code"]) == ("ok", None)
    assert checks(report) == [("format", True), ("root", True), ("token", True), ("brief", True)]


def test_verify_reads_a_binary_token_as_npm_yaml_does(copy, capsys):
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text() + FAVICON)
    doc = sidecar(copy)
    doc["token"]["hash"] = FAVICON_TOKEN
    path = write_sidecar(copy, doc)

    call_command("verify", str(path), "--json")

    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["error_code"], report["authoritative"]) == ("ok", None, True)
    assert detail(report, "token").endswith("(canonical JSON of the parsed YAML)")


def test_binary_values_are_bounded():
    chunk = "A" * 4 * ((MAX_BINARY_BYTES // 2) // 3 + 1)  # just over half the bound, decoded
    assert len(load(f"a: !!binary {chunk}\n")["a"]) > MAX_BINARY_BYTES // 2
    with pytest.raises(YAML12Error) as refused:
        load(f"a: !!binary {chunk}\nb: !!binary {chunk}\n")
    assert str(refused.value) == (
        f"line 2 column 4: the !!binary values decode to more than {MAX_BINARY_BYTES} bytes; "
        "refused (hashing writes every byte out as an object entry)"
    )


def test_an_edited_brief_fails_naming_both_hash_paths(copy):
    brief = copy / "briefs" / "landing.yml"
    brief.write_text(brief.read_text() + "extra: field\n")
    text = brief.read_text()

    report = verify(copy / "docs" / "evals" / f"{SWISS}.replay.json")

    reason = (
        "brief contents have changed since the run (neither raw-bytes nor canonical-YAML hash "
        f"matches; raw-bytes hash {sha(text.encode())})"
    )
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == f"brief: {reason}"
    assert report["observed"] == ahd.hash_structured(text)
    assert checks(report)[-2:] == [("token", True), ("brief", False)]


def test_a_markdown_brief_hashes_its_exact_bytes_first(copy):
    brief = copy / "briefs" / "landing.md"
    brief.write_bytes(b"\xef\xbb\xbf# Landing\n\nA page: for designers.\r\n")
    doc = sidecar(copy)
    doc["brief"] = {"path": "briefs/landing.md", "hash": sha(brief.read_bytes())}
    path = write_sidecar(copy, doc)

    report = verify(path)
    assert report["status"] == "ok"
    assert detail(report, "brief") == f"hash matches {doc['brief']['hash']} (raw bytes)"

    brief.write_bytes(b"# Landing\n\nA page: for designers: edited.\n")
    report = verify(path)
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["observed"] is None
    assert report["message"].startswith(
        "brief: brief is not valid YAML and the raw-bytes hash does not match: line 3 column "
    )
    assert report["message"].endswith(f"(raw-bytes hash {sha(brief.read_bytes())})")


def test_a_critique_run_without_a_brief_checks_the_token_only(copy):
    doc = sidecar(copy)
    doc["kind"] = "critique"
    doc["brief"] = None
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["status"] == "ok"
    assert checks(report) == [("format", True), ("root", True), ("token", True)]
    assert detail(report, "format").endswith(", backfilled, no brief recorded")


def test_a_missing_token_file_is_a_missing_snapshot(copy):
    (copy / "tokens" / "swiss-editorial.yml").unlink()

    report = verify(copy / "docs" / "evals" / f"{SWISS}.md")

    where = copy / "tokens" / "swiss-editorial.yml"
    assert report["status"] == "refused"
    assert report["error_code"] == MISSING_SNAPSHOT
    assert report["message"] == f"token: token file not found at {where}"
    assert (report["expected"], report["observed"]) == (SWISS_TOKEN, None)
    assert detail(report, "token") == (
        f"token file not found at {where}; expected {SWISS_TOKEN}, actual <none>"
    )


def test_a_token_that_no_longer_parses_fails(copy):
    (copy / "tokens" / "swiss-editorial.yml").write_text("a: 1\na: 2\n")

    report = verify(copy / "docs" / "evals" / f"{SWISS}.md")

    where = copy / "tokens" / "swiss-editorial.yml"
    assert report["error_code"] == INTEGRITY_FAILURE
    assert report["message"] == (
        f"token: failed to parse token at {where}: line 2 column 1: Map keys must be unique"
    )


# --- paths written on another machine -------------------------------------------------------------


@pytest.mark.parametrize(
    "recorded",
    [
        "/home/runner/work/ahd/ahd/tokens/swiss-editorial.yml",
        "C:\\actions-runner\\_work\\ahd\\ahd\\tokens\\swiss-editorial.yml",
    ],
)
def test_an_absolute_ci_path_resolves_under_the_root_and_says_it_is_not_portable(copy, recorded):
    doc = sidecar(copy)
    doc["token"]["path"] = recorded
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["status"] == "ok"
    assert detail(report, "token") == (
        f"hash matches {SWISS_TOKEN} (canonical JSON of the parsed YAML); the recorded path "
        f"{recorded} is not portable (an absolute path on the machine that wrote the sidecar); "
        "resolved as tokens/swiss-editorial.yml under the checkout root"
    )


def test_an_absolute_path_that_matches_nothing_under_the_root_is_missing(copy):
    doc = sidecar(copy)
    doc["token"]["path"] = "/home/runner/work/ahd/ahd/tokens/gone.yml"
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["error_code"] == MISSING_SNAPSHOT
    assert detail(report, "token").endswith(
        "the recorded path /home/runner/work/ahd/ahd/tokens/gone.yml is not portable (an "
        "absolute path on the machine that wrote the sidecar) and no file under the checkout "
        "root matches its trailing parts"
    )


def test_an_absolute_path_inside_the_root_is_used_as_it_is(copy):
    doc = sidecar(copy)
    doc["token"]["path"] = str(copy / "tokens" / "swiss-editorial.yml")
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["status"] == "ok"
    assert "not portable" not in detail(report, "token")


def test_an_absolute_path_outside_the_root_is_looked_up_under_it_even_if_it_exists(copy):
    recorded = str(CHECKOUT / "tokens" / "swiss-editorial.yml")  # exists, outside `copy`
    doc = sidecar(copy)
    doc["token"]["path"] = recorded
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["status"] == "ok"
    assert detail(report, "token") == (
        f"hash matches {SWISS_TOKEN} (canonical JSON of the parsed YAML); the recorded path "
        f"{recorded} is not portable (an absolute path on the machine that wrote the sidecar); "
        "resolved as tokens/swiss-editorial.yml under the checkout root"
    )


def test_the_lookup_stays_under_the_root(copy, tmp_path):
    (tmp_path / "secret.yml").write_text("a: 1\n")  # beside the root, not under it

    located = ahd.resolve_input("/home/runner/secret.yml", copy)

    assert located.path == Path("/home/runner/secret.yml")
    assert located.refused is None
    assert located.note is not None
    assert located.note.endswith("no file under the checkout root matches its trailing parts")


# --- the root -------------------------------------------------------------------------------


def test_no_root_above_the_file_is_a_usage_error_that_says_how_to_pass_one(tmp_path):
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")

    with pytest.raises(ahd.AhdRootNotFound) as failed:
        verify(tmp_path / "x.replay.json")

    assert str(failed.value) == (
        f"{tmp_path / 'x.replay.json'}: no AHD checkout root found (no package.json named "
        f"@adastracomputing/ahd in {tmp_path} or its 7 parent directories); pass the checkout "
        "with --root DIR"
    )


def test_a_given_root_is_used(tmp_path):
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")

    report = verify(tmp_path / "x.replay.json", root=CHECKOUT)

    assert report["status"] == "ok"
    assert detail(report, "root") == f"checkout root {CHECKOUT} (given with --root)"


def test_a_package_json_of_another_package_is_not_a_root(copy):
    (copy / "package.json").write_text('{"name": "ahd"}')

    with pytest.raises(ahd.AhdRootNotFound):
        verify(copy / "docs" / "evals" / f"{SWISS}.md")


@pytest.mark.parametrize(("depth", "found"), [(7, True), (8, False)])
def test_the_walk_up_looks_at_the_reports_directory_and_seven_parents(tmp_path, depth, found):
    (tmp_path / "package.json").write_text('{"name": "@adastracomputing/ahd"}')
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(depth)])
    deep.mkdir(parents=True)

    assert ahd.find_root(deep) == (tmp_path if found else None)


# --- refusals ------------------------------------------------------------------------------------


def test_schema_version_2_is_unsupported(copy):
    doc = sidecar(copy)
    doc["schema_version"] = 2
    path = write_sidecar(copy, doc)

    report = verify(path)

    message = (
        "2026-04-21-swiss.replay.json.schema_version: 2 is newer than this verifier supports "
        "(1); a newer AHD may have changed semantics it cannot apply correctly"
    )
    assert report["status"] == "refused"
    assert report["error_code"] == UNSUPPORTED_SCHEMA_VERSION
    assert report["message"] == message
    assert (report["expected"], report["observed"]) == ("1", "2")
    assert report["checks"] == [{"name": "format", "ok": False, "detail": message}]


def test_unknown_fields_are_ignored_and_listed(copy):
    doc = sidecar(copy)
    doc["provenance"] = {"runner": "ci"}
    doc["token"]["size"] = 4374
    path = write_sidecar(copy, doc)

    report = verify(path)

    assert report["status"] == "ok"
    assert detail(report, "format").endswith("; ignored unknown fields: provenance, token.size")
    assert report["unprotected_fields"][-1] == "provenance"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("argv"), "x.replay.json.argv: required"),
        (lambda d: d.update(schema_version=0), "x.replay.json.schema_version: expected 1, got 0"),
        (
            lambda d: d.update(schema_version="1"),
            "x.replay.json.schema_version: expected 1, got '1'",
        ),
        (
            lambda d: d.update(kind="eval"),
            "x.replay.json.kind: expected one of eval-live, critique, eval-image, got 'eval'",
        ),
        (
            lambda d: d["token"].update(hash="sha256:abc"),
            "x.replay.json.token.hash: expected sha256:<64 lower-case hex>, got 'sha256:abc'",
        ),
        (lambda d: d.update(token=None), "x.replay.json.token: expected an object, got null"),
        (
            lambda d: d.update(invoked_at="2026-04-21 21:48"),
            "x.replay.json.invoked_at: invoked_at must be an ISO-8601 datetime string",
        ),
        (
            lambda d: d["sampling"].update(n=0),
            "x.replay.json.sampling.n: expected a positive integer, got a number",
        ),
        (
            lambda d: d["models"][0].update(provider_request_ids="req_1"),
            "x.replay.json.models[0].provider_request_ids: expected an array of strings, got a "
            "string",
        ),
    ],
)
def test_a_sidecar_that_does_not_match_the_schema_is_malformed(tmp_path, edit, message):
    doc = json.loads((EVALS / f"{SWISS}.replay.json").read_bytes())
    edit(doc)
    path = tmp_path / "x.replay.json"
    path.write_text(json.dumps(doc))

    report = verify(path, root=CHECKOUT)

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == message


def test_a_report_without_its_sidecar_is_refused(tmp_path):
    (tmp_path / "lonely.md").write_text("# report\n")

    report = verify(tmp_path / "lonely.md")

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == (
        f"No replay sidecar found at {tmp_path / 'lonely.replay.json'}. Re-run the "
        "report-producing command at v0.10+, which emits the sidecar alongside the markdown, "
        "or pass the sidecar path directly."
    )


def test_the_sidecar_of_a_report_is_beside_it():
    assert ahd.sidecar_path_for(Path("a/b.md")) == Path("a/b.replay.json")
    assert ahd.sidecar_path_for(Path("a/b.replay.json")) == Path("a/b.replay.json")
    assert ahd.sidecar_path_for(Path("a/b.txt")) == Path("a/b.txt.replay.json")
    assert ahd.sidecar_path_for(Path("a/b.md.md")) == Path("a/b.md.replay.json")


# --- YAML 1.2 core, as npm yaml v2 parses it ---------------------------------------------------

# (YAML text, what AHD hashes: JSON.stringify(canonicalizeJson(YAML.parse(text)))), produced by
# yaml 2.9.1 under Node
VECTORS = [
    (
        "a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\n",
        '{"a":"yes","b":"no","c":"on","d":"off","e":"y","f":"n"}',
    ),
    (
        "a: true\nb: True\nc: TRUE\nd: false\ne: False\nf: FALSE\ng: tRue\n",
        '{"a":true,"b":true,"c":true,"d":false,"e":false,"f":false,"g":"tRue"}',
    ),
    (
        "a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: nUll\n",
        '{"a":null,"b":null,"c":null,"d":null,"e":null,"f":"nUll"}',
    ),
    ("a: 0o17\nb: 017\nc: 0x1F\nd: +12\ne: -0\n", '{"a":15,"b":17,"c":31,"d":12,"e":0}'),
    ("a: 0b101\nb: 1_000\nc: -0x1F\nd: 0O17\n", '{"a":"0b101","b":"1_000","c":"-0x1F","d":"0O17"}'),
    ("a: 190:20:30\nb: 1:30.5\n", '{"a":"190:20:30","b":"1:30.5"}'),
    (
        "a: 1e3\nb: .5\nc: 1.\nd: 1.5E3\ne: -1.e-5\nf: 1.0\n",
        '{"a":1000,"b":0.5,"c":1,"d":1500,"e":-0.00001,"f":1}',
    ),
    (
        "a: .inf\nb: -.Inf\nc: +.INF\nd: .nan\ne: .NaN\nf: .Nan\ng: 1e400\n",
        '{"a":null,"b":null,"c":null,"d":null,"e":null,"f":".Nan","g":null}',
    ),
    (
        "a: 2001-12-14\nb: 2001-12-14t21:59:43.10-05:00\n",
        '{"a":"2001-12-14","b":"2001-12-14t21:59:43.10-05:00"}',
    ),
    ("base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n", '{"base":{"x":1},"m":{"<<":{"x":1},"y":2}}'),
    ("a: =\n", '{"a":"="}'),
    ("a: ! 12\nb: ! true\n", '{"a":"12","b":"true"}'),
    ("x: &a 1\ny: &a 2\nz: *a\n", '{"x":1,"y":2,"z":2}'),
    (
        "1: x\nnull: y\n1.5e3: z\n.inf: q\ntrue: t\n0x10: h\n",
        '{"1":"x","16":"h","1500":"z","":"y","Infinity":"q","true":"t"}',
    ),
    ('"1": a\n1: b\n', '{"1":"b"}'),
    (
        "a: !!float 1\nb: !!int 0x10\nc: !!str 12\nd: !foo 12\ne: !!bool yes\n",
        '{"a":"1","b":16,"c":"12","d":"12","e":"yes"}',
    ),
    (
        "a: 9007199254740993\nb: 123456789012345678901234567890\n",
        '{"a":9007199254740992,"b":1.2345678901234568e+29}',
    ),
    ('a: "\\/"\n', '{"a":"/"}'),
    ("a:\tb\nc: x\ty\n", '{"a":"b","c":"x\\ty"}'),
    ("a: x\u2028y\n", '{"a":"x\u2028y"}'),
    ("", "null"),
    ("__proto__: {a: 1}\nb: 2\n", '{"b":2}'),
    (
        "{b: 1, a: [3, {d: 1, c: 2}], 10: x, 2: y}\n",
        '{"2":"y","10":"x","a":[3,{"c":2,"d":1}],"b":1}',
    ),
]


@pytest.mark.parametrize(("text", "expected"), VECTORS)
def test_yaml_vectors_hash_as_yaml_v2_parses_them(text, expected):
    assert js_sorted(load(text)).decode() == expected


# !!binary as yaml 2.9.1 reads it under Node 20 (a Buffer: Buffer.from(text, "base64")), and
# what AHD hashes of it: JSON.stringify(canonicalizeJson(YAML.parse(text))), run once under Node
BINARY_VECTORS = [
    ("a: !!binary aGVsbG8=\n", '{"a":{"0":104,"1":101,"2":108,"3":108,"4":111}}'),
    ("a: !!binary |\n  aGVs\n  bG8=\n", '{"a":{"0":104,"1":101,"2":108,"3":108,"4":111}}'),
    ('a: !!binary "aGVs bG8="\n', '{"a":{"0":104,"1":101,"2":108,"3":108,"4":111}}'),
    ("a: !!binary aGVsbG\n", '{"a":{"0":104,"1":101,"2":108,"3":108}}'),
    ("a: !!binary a\n", '{"a":{}}'),
    ("a: !!binary a*b=\n", '{"a":{"0":105}}'),
    ('a: !!binary ""\n', '{"a":{}}'),
    ("a: !!binary\n", '{"a":{}}'),
    (
        "a: !!binary AAECAwQFBgcICQoLDA0ODxAREhM=\n",
        '{"a":{"0":0,"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"17":17,"18":18,"19":19}}',
    ),
    ("a: [!!binary aGk=, 1]\n", '{"a":[{"0":104,"1":105},1]}'),
    ("a: !!binary aG=k\n", '{"a":{"0":104}}'),
    ("a: !<tag:yaml.org,2002:binary> aGk=\n", '{"a":{"0":104,"1":105}}'),
    ("a: !!binary {x: 1}\n", '{"a":{"x":1}}'),
    ("a: &x !!binary aGk=\nb: *x\n", '{"a":{"0":104,"1":105},"b":{"0":104,"1":105}}'),
    ('a: !!binary "aGk=\\u2028QQ=="\n', '{"a":{"0":104,"1":105}}'),
    ('a: !!binary "aG\\u2028k="\n', '{"a":{"0":104,"1":105}}'),
    ("a: !!binary >\n  aGVs\n\n  bG8=\n", '{"a":{"0":104,"1":101,"2":108,"3":108,"4":111}}'),
    ("a: !!binary aG\u2028k=\n", '{"a":{"0":104,"1":105}}'),
    ('a: !!binary "aGk\x85=QQ"\n', '{"a":{"0":104,"1":105}}'),
    ("a: !!binary aGVs\u2029bG8\n", '{"a":{"0":104,"1":101,"2":108,"3":108,"4":111}}'),
]


@pytest.mark.parametrize(("text", "expected"), BINARY_VECTORS)
def test_binary_values_hash_as_yaml_v2_reads_them(text, expected):
    assert js_sorted(load(text)).decode() == expected


# Buffer.from(text, "base64").toString("hex") under Node 20: lenient, low byte of each UTF-16 unit
NODE_BASE64 = [
    ("aGVsbG8=", "68656c6c6f"),
    ("aGVsbG8", "68656c6c6f"),
    ("aGVsbG", "68656c6c"),
    ("a", ""),
    ("", ""),
    ("aG=k", "68"),
    ("a*b=", "69"),
    ("aGk=====", "6869"),
    ("aGVs bG8=", "68656c6c6f"),
    ("aGVs\n\tbG8=", "68656c6c6f"),
    ("-_-_", "fbffbf"),
    ("+/+/", "fbffbf"),
    ("aGk\u013d", "6869"),
    ("aGk=\xa0QQ", "6869"),
    ("aG\U0001f600k=", "68"),
    ("QQ", "41"),
]


@pytest.mark.parametrize(("text", "hex_bytes"), NODE_BASE64)
def test_binary_text_decodes_as_nodes_buffer_does(text, hex_bytes):
    assert _node_base64(text).hex() == hex_bytes


# (text, PyYAML safe_load: YAML 1.1, the YAML 1.2 core value): one vector per difference
DIFFERENCES = [
    ("a: yes", {"a": True}, {"a": "yes"}),
    ("a: off", {"a": False}, {"a": "off"}),
    ("a: 0o17", {"a": "0o17"}, {"a": 15}),
    ("a: 017", {"a": 15}, {"a": 17}),
    ("a: 0b101", {"a": 5}, {"a": "0b101"}),
    ("a: 1_000", {"a": 1000}, {"a": "1_000"}),
    ("a: 190:20:30", {"a": 685230}, {"a": "190:20:30"}),
    ("a: 1e3", {"a": "1e3"}, {"a": 1000.0}),
    ("a: 2001-12-14", {"a": datetime.date(2001, 12, 14)}, {"a": "2001-12-14"}),
    (
        "b: &b {x: 1}\nm: {<<: *b, y: 2}",
        {"b": {"x": 1}, "m": {"x": 1, "y": 2}},
        {"b": {"x": 1}, "m": {"<<": {"x": 1}, "y": 2}},
    ),
    ("a: ! 12", {"a": 12}, {"a": "12"}),
]


@pytest.mark.parametrize(("text", "yaml_1_1", "yaml_1_2"), DIFFERENCES)
def test_each_difference_from_yaml_1_1(text, yaml_1_1, yaml_1_2):
    assert yaml.safe_load(text) == yaml_1_1
    assert load(text) == yaml_1_2


@pytest.mark.parametrize(
    ("text", "yaml_1_1_error"),
    [
        ("a: =\n", yaml.constructor.ConstructorError),
        ("x: &a 1\ny: &a 2\nz: *a\n", yaml.composer.ComposerError),
        ("a:\tb\n", yaml.scanner.ScannerError),
    ],
)
def test_what_yaml_1_1_refuses_and_yaml_1_2_reads(text, yaml_1_1_error):
    with pytest.raises(yaml_1_1_error):
        yaml.safe_load(text)
    load(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: 1\na: 2\n", "line 2 column 1: Map keys must be unique"),
        ("1: a\n1.0: b\n", "line 2 column 1: Map keys must be unique"),
        ("null: a\n~: b\n", "line 2 column 1: Map keys must be unique"),
        ("true: a\nTrue: b\n", "line 2 column 1: Map keys must be unique"),
        ("<<: {a: 1}\n<<: {b: 2}\n", "line 2 column 1: Map keys must be unique"),
        (
            "--- 1\n--- 2\n",
            "line 2 column 1: expected a single document in the stream; but found another document",
        ),
        (
            "&a [*a]",
            "line 1 column 5: the alias *a refers to a node that contains it; JSON cannot "
            "represent a circular structure",
        ),
        (
            "a: *x\n",
            "line 1 column 4: unresolved alias (the anchor must be set before the alias): x",
        ),
        (
            "a: !!timestamp 2001-12-14\n",
            "line 1 column 4: the explicit tag !!timestamp is not supported",
        ),
        (
            "!!binary aGk=: 1\n",
            "line 1 column 1: a mapping key is a !!binary value; yaml v2 would write it as "
            "YAML flow text, which this verifier does not reproduce",
        ),
        ("a: !!set {x, y}\n", "line 1 column 4: the explicit tag !!set is not supported"),
        (
            "? [1, 2]\n: v\n",
            "line 1 column 3: a mapping key is a collection; yaml v2 would write it as YAML "
            "flow text, which this verifier does not reproduce",
        ),
        (
            "a:\n\tb: 1\n",
            "line 2 column 1: while scanning for the next token; found character '\\t' that "
            "cannot start any token",
        ),
    ],
)
def test_what_yaml_v2_refuses_is_refused(text, message):
    with pytest.raises(YAML12Error) as refused:
        load(text)
    assert str(refused.value) == message


def test_the_alias_limit_is_yaml_v2s():
    def aliases(n: int) -> str:
        return "a: &a x\nb: [" + ", ".join(["*a"] * n) + "]\n"

    assert MAX_ALIAS_COUNT == 100
    assert len(load(aliases(99))["b"]) == 99
    with pytest.raises(YAML12Error, match="Excessive alias count"):
        load(aliases(100))
    assert len(load("a: &a []\nb: [" + ", ".join(["*a"] * 500) + "]\n")["b"]) == 500


def test_a_billion_laughs_stops_early():
    text = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(YAML12Error, match="Excessive alias count"):
        load(text)


def test_aliases_share_their_anchors_value():
    value = load("a: &a {x: [1]}\nb: *a\n")
    assert value["a"] is value["b"]


def test_an_empty_or_comment_only_document_is_null():
    assert load("") is None
    assert load("# nothing\n") is None
    assert js_sorted(load("")) == b"null"


def test_unicode_line_separators_are_content_in_yaml_1_2():
    assert load('a: x\u2028y\nk\u0085: "v\u2029"\n') == {"a": "x\u2028y", "k\u0085": "v\u2029"}
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load("a: x\u2028y\n")


# --- detection and the verify command ----------------------------------------------------------


def test_the_format_name_matches_the_module():
    assert ahd.FORMAT == AHD
    assert ahd.FORMAT in format_names()


def test_sidecars_and_reports_are_detected():
    data = (EVALS / f"{SWISS}.replay.json").read_bytes()
    assert detect_format(data, f"{SWISS}.replay.json") == "ahd-replay"
    assert detect_format(b"# report", f"{SWISS}.md") == "ahd-replay"
    assert detect_format(data, "renamed.json") == "ahd-replay"


def test_the_service_needs_the_path_on_disk():
    data = (EVALS / f"{SWISS}.replay.json").read_bytes()

    report = trace_verify_file(source=io.BytesIO(data), filename="x.replay.json")

    assert report["error_code"] == MALFORMED_TRACE
    assert report["message"] == (
        "x.replay.json: an AHD sidecar is verified against its checkout on disk"
    )


def test_verify_prints_the_per_field_list_and_exits_0():
    out = io.StringIO()

    call_command("verify", str(EVALS / f"{SWISS}.md"), stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "ok"
    assert [line[:12] for line in lines[1:5]] == [
        "  ok   forma",
        "  ok   root:",
        "  ok   token",
        "  ok   brief",
    ]
    assert lines[-1] == "verdict: replay inputs intact"


def test_verify_prints_fail_for_drift_and_exits_1(copy):
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text().replace("ratio: 1.333", "ratio: 1.5"))
    out = io.StringIO()

    with pytest.raises(SystemExit) as exited:
        call_command("verify", str(copy / "docs" / "evals" / f"{SWISS}.md"), stdout=out)

    assert exited.value.code == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("tamper_detected INTEGRITY_FAILURE: token: token contents")
    assert lines[3].startswith(
        "  FAIL token: token contents have changed since the run; re-hash differs; expected "
        f"{SWISS_TOKEN}, actual sha256:"
    )
    assert lines[4].startswith("  ok   brief: hash matches")
    assert lines[-1] == "verdict: drift detected"


def test_verify_takes_root_and_prints_json(tmp_path):
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")
    out = io.StringIO()

    call_command(
        "verify", str(tmp_path / "x.replay.json"), "--root", str(CHECKOUT), "--json", stdout=out
    )

    report = json.loads(out.getvalue())
    assert report["status"] == "ok"
    assert report["format"] == "ahd-replay"


def test_verify_without_a_root_is_a_usage_error(tmp_path):
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", tmp_path / "x.replay.json")

    with pytest.raises(CommandError) as failed:
        call_command("verify", str(tmp_path / "x.replay.json"))

    assert failed.value.returncode == 2
    assert str(failed.value).endswith("pass the checkout with --root DIR")

    with pytest.raises(CommandError) as failed:
        call_command("verify", str(tmp_path / "x.replay.json"), "--root", str(tmp_path / "no"))
    assert failed.value.returncode == 2
    assert str(failed.value) == f"--root {tmp_path / 'no'}: not a directory"


def test_the_command_line_exits_0_1_and_2(copy, tmp_path):
    token = copy / "tokens" / "swiss-editorial.yml"
    token.write_text(token.read_text().replace("base: 17", "base: 18"))
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copyfile(EVALS / f"{SWISS}.replay.json", lonely / "x.replay.json")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
    }
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    targets = [
        EVALS / f"{SWISS}.md",
        copy / "docs" / "evals" / f"{SWISS}.md",
        lonely / "x.replay.json",
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, manage, "verify", str(target)],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for target in targets
    ]
    results = [(p, *p.communicate(timeout=120)) for p in procs]

    (ok, ok_out, _), (drift, drift_out, _), (usage, _, usage_err) = results
    assert ok.returncode == 0
    assert ok_out.splitlines()[-1] == "verdict: replay inputs intact"
    assert drift.returncode == 1
    assert "  FAIL token: " in drift_out
    assert drift_out.splitlines()[-1] == "verdict: drift detected"
    assert usage.returncode == 2
    assert "pass the checkout with --root DIR" in usage_err
