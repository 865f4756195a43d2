"""One grouping of an upload's files, by the formats' own companion rules (data): the upload
page receives the rules as a JSON data island and upload.js names no format; the server
groups a batch by the same rules (plus what it reads: a file's detected format, and the files
a file names)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from django.conf import settings

from core.formats import companion_alone, companion_rules, group_companions

UPLOAD_JS = Path(settings.BASE_DIR) / "static" / "js" / "upload.js"

RULES = [
    {
        "format": "ahd-replay",
        "trace": r"\.replay\.json$",
        "companion": r"\.(tar\.gz|tgz|zip)$|^(?!.*\.(json|jsonl|gz)$)",
        "role": "input",
        "needs_owner": False,
        "beside": False,
    },
    {
        "format": "contextos-trace",
        "trace": r"\.contextos\.json$",
        "companion": r"\.(pack|kg)\.json$",
        "role": "input",
        "needs_owner": False,
        "beside": True,
    },
    {
        "format": "paxman-artifact",
        "trace": r"\.json$",
        "companion": r"^{stem}\.contract\.json$",
        "role": "contract",
        "needs_owner": True,
        "beside": True,
    },
    {
        "format": "mace-reflective-log",
        "trace": r"\.json$",
        "companion": "{named}.json",
        "role": "input",
        "needs_owner": False,
        "beside": True,
        "named_by": [
            "selfrep_snapshot_id",
            "brainstate_snapshot_id",
            "router_snapshot_id",
            "privacy_snapshot_id",
            "governance_snapshot_id",
        ],
        "max_bytes": 64 * 1024**2,
    },
]


def test_the_rules_are_each_formats_own_in_registration_order():
    assert companion_rules() == RULES


def test_the_upload_page_carries_the_rules_as_a_json_data_island(as_persona):
    body = as_persona("alice").get("/traces/upload/").content.decode()
    island = re.search(
        r'<script id="companion-rules" type="application/json">(.*?)</script>', body, re.S
    )
    assert island is not None
    assert json.loads(island.group(1)) == RULES


def test_upload_js_names_no_format_and_no_file_suffix():
    script = UPLOAD_JS.read_text()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("//"))
    for word in ("replay.json", "contextos", "contract", "pack", "kg", "tar", "zip", "ahd"):
        assert word not in code.lower(), word
    assert 'document.getElementById("companion-rules")' in code


DROP = [
    "2026-04-21-swiss.replay.json",
    "swiss-editorial.yml",
    "landing.yml",
    "inputs.tar.gz",
    "refund.contextos.json",
    "refund-triage@1.4.0.pack.json",
    "kg-snapshot.kg.json",
    "x.json",
    "x.contract.json",
    "y.contract.json",
    "pass.trace.json",
]


def test_a_drop_is_grouped_by_name_as_the_page_groups_it():
    groups = group_companions(DROP)
    assert {owner: [c for c, _ in group] for owner, group in groups.items()} == {
        "2026-04-21-swiss.replay.json": ["swiss-editorial.yml", "landing.yml", "inputs.tar.gz"],
        "refund.contextos.json": ["refund-triage@1.4.0.pack.json", "kg-snapshot.kg.json"],
        "x.json": ["x.contract.json"],
    }
    assert [rule.role for _c, rule in groups["x.json"]] == ["contract"]


def test_the_server_also_takes_a_file_detected_as_the_format_whatever_its_name():
    names = ["pass.trace.json", "refund-triage@1.4.0.pack.json", "kg-snapshot.kg.json"]
    assert group_companions(names) == {}
    groups = group_companions(names, {"pass.trace.json": "contextos-trace"})
    assert [c for c, _ in groups["pass.trace.json"]] == names[1:]


def test_a_companion_that_needs_its_trace_is_known_by_its_name_alone():
    found = companion_alone("y.contract.json")
    assert found is not None
    assert found[0] == "paxman-artifact"
    assert companion_alone("y.json") is None
    assert companion_alone("landing.yml") is None


def test_the_server_sniffs_each_file_of_a_batch_once(monkeypatch, db):
    from replay import services
    from tests.console.conftest import trace_bytes

    sniffed = []
    real = services.sniff

    def counting(source, filename):
        sniffed.append(filename)
        return real(source, filename)

    monkeypatch.setattr(services, "sniff", counting)
    files = [
        ("a.trace.json", io.BytesIO(trace_bytes("ok"))),
        ("x.json", io.BytesIO(b'{"contract_id": "c"}')),
        ("x.contract.json", io.BytesIO(b"{}")),
    ]
    outcomes = services.trace_upload_batch(files=files)
    assert sorted(sniffed) == ["a.trace.json", "x.contract.json", "x.json"]
    assert [o.filename for o in outcomes] == ["a.trace.json", "x.json", "x.contract.json"]
    assert outcomes[2].input_of == "x.json"


def test_a_rule_by_content_names_the_files_the_server_takes_as_inputs():
    """The MACE rule the page reads a log by (named_by) names exactly the files the server's
    input_names gives for the same log: one rule, two readers."""
    from core.formats.mace.adapter import NAMED_SNAPSHOTS, MaceFormat
    from tests.replay import mace_reference as ref

    made = ref.job()
    data = ref.dumps(made["log"])
    expected = [f"{made['snapshots'][k]['snapshot_id']}.json" for k in ref.KINDS]
    assert NAMED_SNAPSHOTS.named(json.loads(data)) == expected
    assert MaceFormat().input_names(io.BytesIO(data), "log.json") == expected
    assert NAMED_SNAPSHOTS.named({"selfrep_snapshot_id": "", "router_snapshot_id": 7}) == []
    assert NAMED_SNAPSHOTS.named([1, 2]) == []


def test_a_rule_by_content_groups_nothing_by_name():
    names = ["log.json", "ac21.json", "x.json", "x.contract.json"]
    groups = group_companions(names, {"log.json": "mace-reflective-log"})
    assert {owner: [c for c, _ in group] for owner, group in groups.items()} == {
        "x.json": ["x.contract.json"]
    }


def test_each_built_in_companion_rule_says_what_it_groups():
    from core.formats import formats, named_input_words

    words = {
        fmt.name: [rule.describes for rule in fmt.companions] for fmt in formats() if fmt.companions
    }
    assert words == {
        "ahd-replay": ["a file the AHD sidecar names, or an archive of them"],
        "contextos-trace": ["a ContextOS trace's pinned pack or KG snapshot"],
        "paxman-artifact": ["a Paxman artifact's contract"],
        "mace-reflective-log": ["a MACE log's snapshot"],
    }
    # what a file a file names (input_names) is: its rule by content's words, else its input
    # rule's; none for a format without input rules
    assert named_input_words("mace-reflective-log") == "a MACE log's snapshot"
    assert named_input_words("ahd-replay") == words["ahd-replay"][0]
    assert named_input_words("paxman-artifact") == ""
    assert named_input_words("replay-trace") == ""
