"""``manage.py replay (TRACE_ID or PATH) [--mode M] [--option NAME=VALUE]... [--json]``: a
governed replay.

contracts.md §4: ``--json`` prints exactly the report; exit 0 for ``ok``, 1 for any other
status, 2 for usage errors. A stored file is named by its trace id, its upload id
(``upload:42``) or its sha256; a trace id several stored files carry is refused with
``AMBIGUOUS_TRACE_ID`` naming each copy (exit 2, nothing runs), never guessed. A file is
ingested first. Every replay goes through ``governance.services.replay_request`` (a signed
REPLAY_REQUEST before, REPLAY_RESULT and friends after) and runs in this process.

``--resume RUN_ID`` continues a diverged run past its divergence. That needs an approved
force-continue (one admin and a council quorum, signed); without one the replay is refused
with FORCE_CONTINUE_REQUIRED (seed 003 REPLAY-06) and the attempt is logged. The run is named
by its id (the ReplayRun's UUID); TARGET names the same run by its id (``replay RUN_ID
--resume``, RUN_ID then left out) or its stored file as a replay names one: ``upload:ID``, its
sha256, or a trace id exactly one stored file carries. A trace id several stored files carry
is refused with ``AMBIGUOUS_TRACE_ID`` naming each copy (exit 2, nothing runs), as without
``--resume``; a TARGET that names another file, or no run, is a usage error (exit 2).

``--user NAME`` acts for that person: the roles matrix (``core.ledger.roles``) decides with the
roles the ledger records for them, as for the pages and the API (production needs auditor and
admin together); a refusal prints ``REQUEST_ROLE: ...`` on stderr and exits 1. Without
``--user`` the command acts as the system: the REPLAY_REQUEST's actor is ``system:cli`` and
its payload says ``"acting_as": "system"``.

``--option NAME=VALUE`` (repeatable) sets one of the format's replay options, VALUE as JSON:
a Verist snapshot's ``validate``, ``strictOutput`` and ``captureArtifacts`` (``--option
validate=false --option captureArtifacts='{"hashOnly": true}'``). An option the format does
not take, a value it does not accept, or an option given with ``--resume`` (a resumed run
keeps the options of the run it resumes) is a usage error, exit 2, before anything is stored
or appended. The run records the options it used.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.errors import ReplayError
from core.formats.protocol import OptionError
from core.ledger import roles
from core.replay.report import AUDIT, MODES, OK, ReplayReport
from governance.cli import refusals_exit_1, user_named
from governance.services import (
    CLI_SYSTEM_ACTOR,
    actor_require,
    force_continue_resume,
    replay_request,
    replay_run_govern,
)
from replay.cli import ProgressBar, add_workers_argument, summarise
from replay.models import ReplayRun
from replay.selectors import trace_to_replay
from replay.services import (
    inputs_beside,
    replay_options_for_file,
    trace_ingest,
)

CLI_ACTOR = CLI_SYSTEM_ACTOR
OPTION_SPELLING = (
    "--option {given!r}: expected NAME=VALUE with VALUE as JSON, e.g. validate=false or "
    'captureArtifacts={{"hashOnly": true}}'
)
OPTION_TWICE = "--option {name} is given twice"
OPTION_WITH_RESUME = (
    "--option cannot be given with --resume: the resumed run keeps the options of the run "
    "it resumes"
)
RESUME_NO_RUN = "{ref}: no such replay run"
RESUME_NO_RUN_ID = (
    "{ref}: no such replay run (--resume without RUN_ID resumes the run TARGET names by its id)"
)
RESUME_OTHER_FILE = (
    "replay {run} is of upload:{upload} (trace {trace_id}), not {target}: name it by the run's "
    "id, upload:{upload}, its sha256 or its trace id"
)


def options_parse(given: list[str] | None) -> dict[str, Any] | None:
    """The ``--option NAME=VALUE`` arguments as an object (None when there are none)."""
    if not given:
        return None
    options: dict[str, Any] = {}
    for item in given:
        name, sep, text = item.partition("=")
        try:
            value = json.loads(text)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise CommandError(OPTION_SPELLING.format(given=item), returncode=2)
        if name in options:
            raise CommandError(OPTION_TWICE.format(name=name), returncode=2)
        options[name] = value
    return options


def refused_report(*, trace: Any, mode: str, error: ReplayError) -> dict[str, Any]:
    """The report of a replay refused before it ran (the engine's report, refused and
    never authoritative whatever the code); ``format`` is null when nothing was stored."""
    report = ReplayReport(
        trace_id=trace.trace_id if trace is not None else None,
        format=trace.format if trace is not None else "",
        mode=mode,
    ).refuse(
        error.code,
        error.message,
        broke_at=error.broke_at,
        expected=error.expected,
        observed=error.observed,
    )
    data = report.to_json()
    if trace is None:
        data["format"] = None
    return data


class Command(BaseCommand):
    help = (
        "Replay a stored trace (by trace id, upload:ID or sha256) or a file (ingested first), "
        "under governance. Exit 0 for ok, 1 for any other status, 2 for usage errors (a trace "
        "id several stored files carry: AMBIGUOUS_TRACE_ID, naming each copy)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "target",
            help="a stored trace id (one file carries it), upload:ID, a sha256, or a path to a "
            "trace file; with --resume, also the run's id",
        )
        parser.add_argument("--mode", choices=MODES, default=AUDIT)
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument(
            "--resume",
            metavar="RUN_ID",
            nargs="?",
            const="",
            default=None,
            help="continue this diverged run (a replay run's id) past its divergence (needs an "
            "approved force-continue); without RUN_ID, the run TARGET names by its id",
        )
        parser.add_argument(
            "--user",
            default=None,
            help="who asks, with their roles per the ledger (default: the system, so named)",
        )
        parser.add_argument(
            "--option",
            action="append",
            metavar="NAME=VALUE",
            dest="replay_options",
            help="one of the format's replay options, VALUE as JSON (repeatable); a Verist "
            "snapshot's: validate, strictOutput, captureArtifacts",
        )
        add_workers_argument(parser)

    def handle(self, *args, **options):
        with refusals_exit_1(self.stderr):
            self._handle(*args, **options)

    def _handle(
        self, *args, target, mode, as_json, resume, user, workers, replay_options, **options
    ):
        actor = None if user is None else user_named(user)
        chosen = options_parse(replay_options)
        if resume is not None:
            if chosen is not None:
                raise CommandError(OPTION_WITH_RESUME, returncode=2)
            self._resume(target, resume, actor, as_json, workers)
            return
        trace = None
        if re.fullmatch(r"[0-9a-f]{32}", target) or not Path(target).is_file():
            # a stored file by upload:ID, by its sha256, or by a trace id one file carries
            try:
                trace = trace_to_replay(target)
            except ReplayError as exc:  # AMBIGUOUS_TRACE_ID: the caller must pick a copy
                report = refused_report(trace=None, mode=mode, error=exc)
                report.update(trace_id=target, authoritative=False, detail=exc.detail)
                self._emit(report, as_json)
                sys.exit(2)
        if trace is None:
            path = Path(target)
            if not path.is_file():
                raise CommandError(f"{target}: neither a stored trace id nor a file", returncode=2)
            actor_require(actor=actor, action=roles.UPLOAD)
            try:
                replay_options_for_file(path=path, options=chosen)
            except OptionError as exc:
                raise CommandError(exc.message, returncode=2) from None
            try:
                # its companion files (a ContextOS trace's pinned pack and KG snapshot, a
                # MACE log's snapshot files) come from its directory, as `ingest` reads them
                inputs = inputs_beside(path) or None
                with path.open("rb") as fh:
                    trace = trace_ingest(
                        source=fh,
                        filename=path.name,
                        uploaded_by=actor,
                        workers=workers,
                        inputs=inputs,
                    ).trace
            except ReplayError as exc:
                self._emit(refused_report(trace=None, mode=mode, error=exc), as_json)
                sys.exit(1)
        try:
            run = replay_request(
                trace=trace,
                mode=mode,
                actor=actor,
                actor_label=CLI_ACTOR,
                enqueue=False,
                options=chosen,
            )
        except OptionError as exc:
            raise CommandError(exc.message, returncode=2) from None
        self._execute(run, as_json, workers)

    def _resume(self, target: str, run_id: str, actor: Any, as_json: bool, workers: int) -> None:
        run = _run_named(run_id or target)
        if run is None:
            message = RESUME_NO_RUN if run_id else RESUME_NO_RUN_ID
            raise CommandError(message.format(ref=run_id or target), returncode=2)
        if _run_named(target) != run:
            # TARGET names the run's stored file, as a replay names one; never guessed
            try:
                named = trace_to_replay(target)
            except ReplayError as exc:  # AMBIGUOUS_TRACE_ID: the caller must pick a copy
                report = refused_report(trace=None, mode=run.mode, error=exc)
                report.update(trace_id=target, authoritative=False, detail=exc.detail)
                self._emit(report, as_json)
                sys.exit(2)
            if named is None or named.pk != run.trace_id:
                raise CommandError(
                    RESUME_OTHER_FILE.format(
                        run=run.id,
                        upload=run.trace_id,
                        trace_id=run.trace.trace_id,
                        target=target,
                    ),
                    returncode=2,
                )
        actor_require(actor=actor, action=roles.MODE_ACTIONS[run.mode])
        try:
            resumed = force_continue_resume(run=run, actor=actor)
        except ReplayError as exc:
            self._emit(refused_report(trace=run.trace, mode=run.mode, error=exc), as_json)
            sys.exit(1)
        self._execute(resumed, as_json, workers)

    def _execute(self, run: ReplayRun, as_json: bool, workers: int) -> None:
        bar = ProgressBar(f"replay {run.trace.trace_id[:12]}", run.progress_total)
        try:
            run = replay_run_govern(run_id=run.id, progress=bar, workers=workers)
        finally:
            bar.close()
        self._emit(run.report, as_json)
        if run.status != OK:
            sys.exit(1)

    def _emit(self, report, as_json):
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            self.stdout.write(summarise(report))


def _run_named(ref: str) -> ReplayRun | None:
    """The replay run whose id (a UUID, in any spelling ``uuid.UUID`` reads) ``ref`` is."""
    try:
        run_id = uuid.UUID(ref.strip())
    except ValueError:
        return None
    return ReplayRun.objects.select_related("trace").filter(id=run_id).first()
