"""Demo data for `make run`: one user per role and demo traces covering every verdict.

Passwords are derived from this machine's SECRET_KEY (HMAC), so running the command again
prints the same ones and changes nothing; nothing secret is in the repository. Admins and
council members get a confirmed TOTP device, created once; its secret is printed every time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from console import roles
from console.files import private_dir, private_write
from console.models import EncryptedTOTPDevice

#: username -> roles (two council members: the default quorum is 2)
DEMO_USERS: dict[str, tuple[str, ...]] = {
    "vera": (roles.VIEWER,),
    "alice": (roles.AUDITOR,),
    "oscar": (roles.OPERATOR,),
    "adam": (roles.ADMIN,),
    "sam": (roles.AUDITOR, roles.ADMIN),
    "cora": (roles.COUNCIL,),
    "colin": (roles.COUNCIL,),
    "lena": (roles.LEGAL,),
}


@dataclass
class DemoUser:
    username: str
    roles: tuple[str, ...]
    password: str
    totp_secret: str = ""
    totp_uri: str = ""
    created: bool = False


def demo_password(username: str) -> str:
    digest = hmac.new(settings.SECRET_KEY.encode(), f"demo:{username}".encode(), hashlib.sha256)
    return "demo-" + base64.urlsafe_b64encode(digest.digest()).decode()[:16]


def demo_users_ensure() -> list[DemoUser]:
    """The demo users, with their roles recorded in the ledger: adam and sam are installed as
    the first admins and cora and colin as the council (``governance install-roles``, once),
    then adam (sam for adam himself) sets everyone's other roles, as on the Users page. Run
    again, it appends nothing for roles already recorded."""
    from governance import membership
    from governance.services import roles_install, user_roles_change

    user_model = get_user_model()
    users = {}
    out = []
    for username, user_roles in DEMO_USERS.items():
        password = demo_password(username)
        user = user_model.objects.filter(username=username).first()
        created = user is None
        if user is None:
            user = user_model.objects.create_user(username, f"{username}@example.org", password)
        users[username] = user
        demo = DemoUser(username, user_roles, password, created=created)
        if set(user_roles) & roles.STRONG_ROLES:
            device = EncryptedTOTPDevice.objects.filter(user=user, confirmed=True).first()
            if device is None:
                device = EncryptedTOTPDevice.objects.create(user=user, name="demo", confirmed=True)
            demo.totp_secret = base64.b32encode(device.bin_key).decode()
            demo.totp_uri = device.config_url
        out.append(demo)
    if not membership.roles_installed():
        roles_install(
            admins=[users[n] for n, r in DEMO_USERS.items() if roles.ADMIN in r],
            council=[users[n] for n, r in DEMO_USERS.items() if roles.COUNCIL in r],
        )
    for username, user_roles in DEMO_USERS.items():
        user = users[username]
        membership.forget(user)
        held = membership.roles_held(user)
        # strong roles come from the installation (or a council quorum), never from here
        wanted = (set(user_roles) - roles.STRONG_ROLES) | (held & roles.STRONG_ROLES)
        if wanted == held:
            continue
        admin = users["sam" if username == "adam" else "adam"]
        membership.forget(admin)
        if roles.ADMIN in membership.roles_held(admin):
            user_roles_change(actor=admin, user=user, roles=wanted, reason="demo users")
    return out


#: what the pages say loaded the demo's traces ("loaded by the demo"): no person uploaded
#: them, so none is named (oscar, the demo operator, uploads only the files under
#: var/demo-uploads/, himself)
DEMO_LABEL = "the demo"


@dataclass
class DemoTrace:
    filename: str
    trace_id: str = ""
    verdict: str = ""
    error_code: str = ""
    refused: str = ""


def demo_traces_ensure(*, replay: bool = True) -> list[DemoTrace]:
    """Ingest the lead's demo traces (idempotent: same bytes, same row) and replay each once."""
    from core.errors import ReplayError
    from core.formats.native.demo import demo_traces
    from core.formats.native.recorder import signer_for
    from core.replay.signatures import HMAC_SHA256
    from governance.services import replay_request, replay_run_govern
    from replay.keys import key_demo_ensure
    from replay.models import Trace
    from replay.selectors import runs_for_trace, trace_verdict_basis
    from replay.services import trace_ingest

    key, secret = key_demo_ensure()
    signer = signer_for(key.key_id, HMAC_SHA256, secret)
    out = []
    for filename, data in demo_traces(signer):
        line = DemoTrace(filename)
        # Idempotent by name: a demo file already stored is kept as it is (a re-recorded
        # file may differ in bytes, e.g. a gzip header's timestamp).
        trace = Trace.objects.filter(filename=filename, uploaded_by=None).first()
        if trace is None:
            try:
                trace = trace_ingest(
                    source=io.BytesIO(data), filename=filename, uploaded_label=DEMO_LABEL
                ).trace
            except ReplayError as exc:
                line.refused = f"{exc.code}: {exc.message}"
                out.append(line)
                continue
        # A governed replay of a tampered trace halts its trace id and snapshots, which the
        # demo variants share; replaying those would halt every demo trace. Their verdict at
        # upload already says tamper_detected; replaying one is left to a person (a halt).
        tampered = trace.last_status == Trace.Status.TAMPER_DETECTED
        if replay and not tampered and not trace.runs.exists():
            run = replay_request(
                trace=trace, mode="audit", actor=None, actor_label="demo", enqueue=False
            )
            replay_run_govern(run_id=run.id)
            trace.refresh_from_db()
        line.trace_id = trace.trace_id
        line.verdict = trace.last_status
        # the code of what the verdict rests on (core.replay.verdicts), not of the latest run: a
        # replay refused while a halt stood decides nothing and is not this trace's code
        basis = trace_verdict_basis(trace, runs_for_trace(trace))
        line.error_code = (
            basis.run.error_code
            if basis.run
            else (trace.ingest_report or {}).get("error_code") or ""
        )
        out.append(line)
    return out


#: the OTLP export bodies `manage.py demo` sends through the receiver (otel/demo/README.md)
OTEL_DEMO_BODIES = ("weather-agent.otlp.bin", "weather-agent-divergent.otlp.bin")


def demo_otel_ensure() -> list[DemoTrace]:
    """Two runs of one agent, as its exporter would send them, through the OTLP receiver
    (stored, read, sealed: their ledger events included), so the trace list shows
    OpenTelemetry traces out of the box. Idempotent: a body already received stores nothing,
    a trace already sealed is reported as it is."""
    from otel.models import OtelTrace, OtlpBody
    from otel.services import otel_seal, otlp_read, otlp_receive
    from replay.models import Trace

    directory = Path(__file__).resolve().parents[1] / "otel" / "demo"
    out = []
    for name in OTEL_DEMO_BODIES:
        received = otlp_receive(
            body=(directory / name).read_bytes(),
            content_type="application/x-protobuf",
            user=None,
            enqueue=False,
        )
        otlp_read(body_pk=OtlpBody.objects.get(sha256=received.sha256).pk)
        line = DemoTrace(name)
        for state in OtelTrace.objects.filter(trace_id__in=received.trace_ids, open=True).order_by(
            "trace_id"
        ):
            otel_seal(trace_id=state.trace_id)
        trace = (
            Trace.objects.filter(trace_id__in=received.trace_ids, format="otel-genai")
            .order_by("-created_at")
            .first()
        )
        if trace is not None:
            line.trace_id = trace.trace_id
            line.verdict = trace.last_status
            line.error_code = (trace.ingest_report or {}).get("error_code") or ""
        out.append(line)
    return out


#: the auditor's first journey (journeys.md): a native trace, an AHD sidecar and a corrupt file
UPLOAD_SAMPLES = ("demo-diverged.trace.json", "2026-04-21-swiss.replay.json", "corrupt.trace.json")


def demo_upload_files_write() -> Path:
    """Write files to try the upload page with under VAR_DIR/demo-uploads/ and return it:
    a native trace (it diverges when replayed), an AHD sidecar (verified against the demo AHD
    checkout, replay/demo_ahd/) and a truncated file (refused, naming where)."""
    from core.formats.native.demo import demo_traces
    from core.formats.native.recorder import signer_for
    from core.replay.signatures import HMAC_SHA256
    from replay.keys import key_demo_ensure

    key, secret = key_demo_ensure()
    traces = dict(demo_traces(signer_for(key.key_id, HMAC_SHA256, secret)))
    directory = private_dir(Path(settings.VAR_DIR) / "demo-uploads")
    native, sidecar, corrupt = UPLOAD_SAMPLES
    private_write(directory / native, traces[native])
    ahd = Path(settings.BASE_DIR) / "replay" / "demo_ahd" / "docs" / "evals" / sidecar
    private_write(directory / sidecar, ahd.read_bytes())
    private_write(directory / corrupt, traces[native][:200])
    return directory
