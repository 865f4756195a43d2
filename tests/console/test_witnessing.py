"""Witnesses wired into the console (issue 21, item 4): each new checkpoint is pushed to real
``python -m witness serve`` processes, their cosignatures verified and stored, the quorum
shown on the ledger page, and a witness refusing a rolled back or rewritten ledger recorded
as a SECURITY_INCIDENT with an alert banner for admins and council."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from core.ledger import codes
from governance import services, transparency, witnessing
from governance.models import GovernanceEvent, WitnessAlert, WitnessCosignature
from replay.dbguards import drop_append_only_sql
from tlog import note as notes
from witness import __main__ as witness_cli

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Witness:
    def __init__(self, tmp: Path, name: str) -> None:
        self.name = name
        self.key = tmp / f"{name.replace('/', '_')}.key"
        self.state = tmp / f"{name.replace('/', '_')}-state"
        self.vkey = witness_cli.keygen(name, str(self.key))
        self.port = free_port()
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> dict[str, str]:
        return {"url": self.url, "vkey": self.vkey}

    def start(self) -> None:
        log_vkey = transparency.verifier_keys()[0]
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "witness", "serve", "--key", str(self.key)),
                *("--state", str(self.state), "--log", log_vkey),
                *("--port", str(self.port), "--quiet"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == f"witness {self.vkey} on {self.url}\n"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None


def append(n: int) -> None:
    for i in range(n):
        services.event_append(event_type=codes.PII_REVEALED, payload={"n": i})


@pytest.fixture
def witnesses(tmp_path) -> Iterator[list[Witness]]:
    transparency._edge.clear()
    append(4)  # and a server key (KEY_ADDED first), so the witnesses know the log's vkey
    assert transparency.tree_size() == 5
    made = [Witness(tmp_path, "witness.test/w1"), Witness(tmp_path, "witness.test/w2")]
    for w in made:
        w.start()
    yield made
    for w in made:
        w.stop()
    transparency._edge.clear()


def test_a_real_witness_cosigns_each_checkpoint_and_the_console_keeps_it(
    witnesses, settings, as_persona
):
    w1 = witnesses[0]
    settings.GOVERNANCE_WITNESSES = [w1.config]
    vera = as_persona("vera")  # (a persona's roles are a ledger event: made first)

    assert [(o.witness, o.outcome, o.size) for o in witnessing.push_all()] == [
        ("witness.test/w1", "cosigned", 6)
    ]
    append(3)
    assert [(o.outcome, o.size) for o in witnessing.push_all()] == [("cosigned", 9)]

    stored = list(
        WitnessCosignature.objects.order_by("tree_size").values_list("tree_size", "witness")
    )
    assert stored == [(6, "witness.test/w1"), (9, "witness.test/w1")]
    cp = transparency.checkpoint()
    cosigned = witnessing.cosigned_note(cp)
    # the export: the server's signature, then the witness's as an extra line, both verifying
    opened = notes.open_note(
        cosigned.encode(),
        [
            notes.parse_verifier(transparency.verifier_keys()[0]),
            notes.parse_verifier(w1.vkey),
        ],
    )
    assert [s.name for s in opened.sigs] == [transparency.origin(), "witness.test/w1"]
    assert cosigned.startswith(cp.note)

    body = vera.get("/api/governance/tlog/").json()
    assert body["cosigned_checkpoint"] == cosigned
    assert [(c["witness"], c["tree_size"]) for c in body["cosignatures"]] == [
        ("witness.test/w1", 9)
    ]
    assert body["witnessed"]["witnessed_size"] == 9

    page = vera.get("/governance/").content.decode()
    assert "Witnessed by 1 of 1 through seq 9." in page
    assert "cosigned size 9" in page


def test_the_ledger_page_shows_the_largest_size_a_quorum_cosigned(witnesses, settings, as_persona):
    w1, w2 = witnesses
    settings.GOVERNANCE_WITNESSES = [w1.config, w2.config]
    settings.GOVERNANCE_WITNESS_QUORUM = 2
    vera = as_persona("vera")
    assert [o.outcome for o in witnessing.push_all()] == ["cosigned", "cosigned"]
    append(3)
    settings.GOVERNANCE_WITNESSES = [w1.config]
    assert [(o.outcome, o.size) for o in witnessing.push_all()] == [("cosigned", 9)]
    settings.GOVERNANCE_WITNESSES = [w1.config, w2.config]

    page = vera.get("/governance/").content.decode()
    assert "Witnessed by 2 of 2 through seq 6." in page
    settings.GOVERNANCE_WITNESS_QUORUM = 1
    page = vera.get("/governance/").content.decode()
    assert "Witnessed by 1 of 2 through seq 9." in page
    settings.GOVERNANCE_WITNESSES = [w1.config, {"url": w2.url, "vkey": w1.vkey}]
    settings.GOVERNANCE_WITNESS_QUORUM = 3
    page = vera.get("/governance/").content.decode()
    assert "Not yet witnessed by 3 of 2." in page


def _roll_back_to(size: int) -> None:
    """An old backup restored: the events after ``size`` and the tree's nodes over them gone
    (the append-only guards dropped, as the database's owner could)."""
    with connection.cursor() as cur:
        for table in ("governance_governanceevent", "governance_merklenode"):
            for drop in drop_append_only_sql(connection.vendor, table):
                cur.execute(drop)
        cur.execute("DELETE FROM governance_governanceevent WHERE seq > %s", [size])
        cur.execute('DELETE FROM governance_merklenode WHERE (("index" + 1) << level) > %s', [size])
    transparency._edge.clear()


def test_a_rollback_the_witness_refuses_is_a_security_incident_once(
    witnesses, settings, as_persona
):
    w1 = witnesses[0]
    settings.GOVERNANCE_WITNESSES = [w1.config]
    clients = {name: as_persona(name) for name in ("adam", "cora", "vera")}  # seq 6 to 8
    append(3)
    assert [(o.outcome, o.size) for o in witnessing.push_all()] == [("cosigned", 11)]
    _roll_back_to(8)
    assert transparency.tree_size() == 8

    outcomes = witnessing.push_all()

    why = witnessing.WHY_AHEAD.format(held=11, size=8)
    assert [(o.outcome, o.size, o.detail) for o in outcomes] == [("incident", 11, why)]
    incident = GovernanceEvent.objects.get(type=codes.SECURITY_INCIDENT)
    reason = witnessing.INCIDENT_REASON.format(name="witness.test/w1", why=why)
    assert incident.payload == {"targets": [], "reason": reason}
    assert list(WitnessAlert.objects.values_list("witness", "size", "status", "incident_seq")) == [
        ("witness.test/w1", 11, 409, incident.seq)
    ]
    # pushed again (the schedule): the same refusal is not recorded twice
    assert [o.outcome for o in witnessing.push_all()] == ["incident"]
    assert GovernanceEvent.objects.filter(type=codes.SECURITY_INCIDENT).count() == 1

    # admins and council see the alert on every page; others do not
    for name in ("adam", "cora"):
        page = clients[name].get("/traces/").content.decode()
        assert "<strong>A witness refused the ledger's history.</strong>" in page
        assert f"(SECURITY_INCIDENT {incident.seq})" in page
    assert 'id="witness-alert"' not in clients["vera"].get("/traces/").content.decode()
    # council may not acknowledge it; an admin does, and it is gone
    alert = WitnessAlert.objects.get()
    assert clients["cora"].post(f"/governance/witness-alert/{alert.id}/ack/").status_code == 403
    assert clients["adam"].post(f"/governance/witness-alert/{alert.id}/ack/").status_code == 303
    assert 'id="witness-alert"' not in clients["cora"].get("/traces/").content.decode()
    assert WitnessAlert.objects.get().acknowledged_by == "adam"


def test_a_rewritten_history_the_witness_refuses_as_inconsistent(witnesses, settings):
    w1 = witnesses[0]
    settings.GOVERNANCE_WITNESSES = [w1.config]
    append(3)
    assert [(o.outcome, o.size) for o in witnessing.push_all()] == [("cosigned", 8)]
    _roll_back_to(6)
    append(4)  # another history of 10 events, sharing the first 6

    outcomes = witnessing.push_all()

    assert [(o.outcome, o.size) for o in outcomes] == [("incident", 10)]
    assert list(WitnessAlert.objects.values_list("size", "status")) == [(10, 422)]
    assert outcomes[0].detail.startswith(
        "the checkpoint of size 10 does not extend the one it cosigned ("
    )


def test_an_unreachable_witness_or_a_wrong_key_stores_nothing(witnesses, settings):
    w1, w2 = witnesses
    settings.GOVERNANCE_WITNESSES = [
        {"url": f"http://127.0.0.1:{free_port()}", "vkey": w1.vkey},
        {"url": w1.url, "vkey": w2.vkey},  # w1 answers, but the key configured is w2's
    ]

    outcomes = witnessing.push_all()

    assert [(o.outcome, o.size) for o in outcomes] == [("unreachable", 5), ("invalid", 5)]
    assert WitnessCosignature.objects.count() == 0


def test_the_command_and_the_button_push(
    witnesses, settings, as_persona, django_capture_on_commit_callbacks
):
    import io

    w1 = witnesses[0]
    settings.GOVERNANCE_WITNESSES = [w1.config]
    out = io.StringIO()
    call_command("governance", "witness-push", stdout=out)
    assert out.getvalue() == "witness.test/w1: cosigned at size 5\n"

    vera, adam = as_persona("vera"), as_persona("adam")
    assert vera.post("/governance/witness-push/").status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        response = adam.post("/governance/witness-push/")
    assert response.status_code == 303
    assert WitnessCosignature.objects.order_by("-tree_size").first().tree_size == 7


def test_the_schedule_runs_the_push_and_a_broken_ledger_is_logged_not_raised(witnesses, settings):
    from governance import tasks

    assert settings.CELERY_BEAT_SCHEDULE["witness-push"]["task"] == "governance.tasks.witness_push"
    settings.GOVERNANCE_WITNESSES = [witnesses[0].config]
    assert tasks.witness_push() == {"witness.test/w1": "cosigned"}

    with connection.cursor() as cur:  # events gone under the tree, which keeps what it saw
        for drop in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
            cur.execute(drop)
        cur.execute("DELETE FROM governance_governanceevent WHERE seq > 3")
    transparency._edge.clear()
    append(3)  # no checkpoint of this history: LEDGER_BROKEN

    assert tasks.witness_push() == {"error": codes.LEDGER_BROKEN}
    assert WitnessCosignature.objects.count() == 1


def test_without_witnesses_nothing_is_pushed_or_shown(settings, as_persona):
    settings.GOVERNANCE_WITNESSES = []
    assert witnessing.push_all() == []
    page = as_persona("vera").get("/governance/").content.decode()
    assert "No witness configured (<code>GOVERNANCE_WITNESSES</code>)." in page


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"url": "http://w"}', 'a list of {"url": ..., "vkey": ...}'),
        ('[{"url": "ftp://w", "vkey": "w+00000000+AA=="}]', "'ftp://w' is not an http(s) URL"),
        ('[{"url": "http://w", "vkey": "w+00000000+AA=="}]', "invalid verifier hash"),
        ("[nope", "Expecting value"),
    ],
)
def test_a_witness_setting_that_is_not_one_stops_the_start_up(value, message):
    import os

    env = {
        **os.environ,
        "GOVERNANCE_WITNESSES": value,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert f"ImproperlyConfigured: GOVERNANCE_WITNESSES: {message}" in done.stderr


def test_each_new_checkpoint_is_pushed_in_the_background_to_real_witnesses(
    witnesses, settings, django_capture_on_commit_callbacks, monkeypatch
):
    from replay import background

    settings.GOVERNANCE_WITNESSES = [w.config for w in witnesses]
    queued = []
    real_enqueue = background.enqueue

    def spy(task, *args):
        queued.append(task.name)
        real_enqueue(task, *args)  # the one runner (eager under the tests' settings)

    monkeypatch.setattr(background, "enqueue", spy)
    with django_capture_on_commit_callbacks(execute=True):
        assert transparency.checkpoint().size == 5  # a page, the API or an export signs one
    assert queued == ["governance.tasks.witness_push"]  # once: the push signed none itself
    append(2)
    with django_capture_on_commit_callbacks(execute=True):
        assert transparency.checkpoint(7).size == 7
    with django_capture_on_commit_callbacks(execute=True):
        transparency.checkpoint(7)  # stored already: nothing new, nothing queued

    assert queued == ["governance.tasks.witness_push"] * 2
    stored = sorted(WitnessCosignature.objects.values_list("witness", "tree_size"))
    assert stored == [
        ("witness.test/w1", 5),
        ("witness.test/w1", 7),
        ("witness.test/w2", 5),
        ("witness.test/w2", 7),
    ]
    assert witnessing.summary()["witnessed_size"] == 7


def test_no_push_is_queued_for_a_new_checkpoint_without_witnesses(
    settings, django_capture_on_commit_callbacks, monkeypatch
):
    from replay import background

    settings.GOVERNANCE_WITNESSES = []
    queued = []
    monkeypatch.setattr(background, "enqueue", lambda task, *a: queued.append(task.name))
    append(2)
    with django_capture_on_commit_callbacks(execute=True):
        transparency.checkpoint()

    assert queued == []


def test_a_bundle_asks_the_witnesses_first_and_passes_an_offline_quorum_check(
    witnesses, settings, tmp_path
):
    from core import bundle
    from core.ledger import chain
    from dsr import evidence
    from governance import ledger

    settings.GOVERNANCE_WITNESSES = [w.config for w in witnesses]
    settings.GOVERNANCE_WITNESS_QUORUM = 2
    assert WitnessCosignature.objects.count() == 0  # nothing cosigned yet: the build asks
    rows = list(
        GovernanceEvent.objects.filter(seq__in=[2, 5]).order_by("seq").values_list(*chain.FIELDS)
    )
    tlog = evidence.tlog_evidence(rows)

    def build(section) -> bytes:
        return bundle.build_bundle(
            bundle.BundleInputs(
                request_ref="dsr_1",
                subject_refs=("subj_X",),
                created_at="2026-02-01T00:00:00.000000Z",
                events=[bundle.event_record(r) for r in rows],
                server_keys=[bundle.server_key_record(k) for k in ledger.server_keys().values()],
                tlog=section,
            ),
            evidence.server_sign,
        )

    path = tmp_path / "bundle.json"
    path.write_bytes(build(tlog))
    log_vkey = transparency.verifier_keys()[0]
    argv = [str(path), "--vkey", log_vkey, "--quorum", "2"]
    for w in witnesses:
        argv += ["--witness", w.vkey]

    done = subprocess.run(
        [sys.executable, "-m", "dsr.bundle_cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    w1, w2 = (f"{w.name}+{notes.parse_verifier(w.vkey).key_id:08x}" for w in witnesses)
    assert (
        f"witnessed: 2 of the 2 cosignatures required; signed: {w1}, {w2}; not signed: none\n"
        in (done.stdout)
    )
    # the same bundle with witness 2's line taken out of the note: refused, naming it
    note = "".join(
        line
        for line in tlog["checkpoint"].splitlines(keepends=True)
        if "witness.test/w2" not in line
    )
    check = bundle.verify_bundle(
        build({**tlog, "checkpoint": note}),
        vkeys=[log_vkey],
        witnesses=[w.vkey for w in witnesses],
        quorum=2,
    )
    assert (check.code, check.message) == (
        codes.BUNDLE_WITNESS_QUORUM,
        f"checkpoint of size 5: 1 of the 2 witness cosignatures required; signed: {w1}; "
        f"not signed: {w2}",
    )
