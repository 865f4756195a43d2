"""Replays: start one, watch it, read its report (with the divergence diff), download it."""

from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST

from console import roles
from console.api.errors import REPORT_NOT_READY
from console.diffview import render_json, step_diffs
from console.jsonview import json_tree
from console.selectors import trace_recorded_outputs
from console.template_loaders import report_template
from console.views.common import partial_or_page, signed_in
from core.errors import ReplayError
from core.formats import formats
from core.formats.protocol import OptionError
from core.ledger.codes import GovernanceError
from core.replay.diff import PointerError, pointer_get
from governance.selectors import (
    force_continue_requests,
    force_continue_standing,
    force_continue_tally,
    production_request_for_run,
)
from governance.services import replay_request, replay_run_requeue, replay_run_stale
from governance.services.replays import replay_stale_seconds
from replay.models import ReplayRun
from replay.selectors import trace_replay_options

MESSAGE_BAD_MODE = "Choose one of the modes offered: {modes}."
MESSAGE_MODE_NOT_ALLOWED = "your roles do not allow a {mode} replay"
#: the replay form's options fieldset is there (only for a format with options): each of
#: the format's options is then a checkbox, unchecked meaning false
OPTIONS_SHOWN = "options-shown"


@require_POST
@signed_in
def run_start_view(request: HttpRequest, trace_ref: str) -> HttpResponse:
    try:
        trace = roles.access_trace_to_replay(request.user, trace_ref, roles.REPLAY_AUDIT)
    except ReplayError as exc:  # AMBIGUOUS_TRACE_ID: a trace id several stored files carry
        context = {"title": "Which stored file?", "message": exc.message, "code": exc.code}
        return render(request, "console/error_page.html", context, status=400)
    mode = request.POST.get("mode", "")
    offered = roles.replay_modes_for(request.user)
    if mode not in (roles.MODE_AUDIT, roles.MODE_SANDBOX, roles.MODE_PRODUCTION):
        message = MESSAGE_BAD_MODE.format(modes=", ".join(offered))
        context = {"title": "Unknown replay mode", "message": message, "code": ""}
        return render(request, "console/error_page.html", context, status=400)
    if mode not in offered:
        raise PermissionDenied(MESSAGE_MODE_NOT_ALLOWED.format(mode=mode))
    options = None
    if request.POST.get(OPTIONS_SHOWN):
        options = {
            option.name: request.POST.get(f"option-{option.name}") == "true"
            for option in trace_replay_options(trace)
        }
    try:
        run = replay_request(trace=trace, mode=mode, actor=request.user, options=options)
    except OptionError as exc:
        context = {"title": "Replay options refused", "message": exc.message, "code": ""}
        return render(request, "console/error_page.html", context, status=400)
    return HttpResponseRedirect(reverse("run-detail", args=[run.id]), status=303)


def _force_continue_why_not(request: HttpRequest, run: ReplayRun) -> str:
    """Why this page offers no force-continue, in a sentence (none is requested yet)."""
    if run.state not in (ReplayRun.State.DONE, ReplayRun.State.FAILED):
        return "A force-continue can be asked for once this replay has finished."
    if run.error_code != "REPLAY_DIVERGENCE":
        ended = run.error_code or run.status or run.state
        return (
            "A force-continue resumes a replay past the step where it diverged "
            f"(REPLAY_DIVERGENCE); this one ended {ended}, which it cannot continue past."
        )
    return "Your roles do not include asking for a force-continue."


def _run_context(request: HttpRequest, run: ReplayRun) -> dict[str, object]:
    report = run.report or {}
    diffs = []
    if report.get("divergences"):
        steps = {d.get("step") for d in report["divergences"]}
        diffs = step_diffs(report, trace_recorded_outputs(run.trace, steps))
    requests = list(force_continue_requests(run_id=run.id))
    # while an open or approved request stands, the page shows it and offers no second one
    can_request = (
        roles.can(request.user, roles.FORCE_CONTINUE_REQUEST)
        and run.error_code == "REPLAY_DIVERGENCE"
        and force_continue_standing(run_id=run.id) is None
    )
    fc_why_not = ""
    if not can_request and not requests:
        fc_why_not = _force_continue_why_not(request, run)
    fmt = formats().get(run.trace.format)
    return {
        "run": run,
        "trace": run.trace,
        "report": report,
        # the format's own part of the report, from its package (ContextOS's verdict)
        "report_template": report_template(fmt),
        "diffs": diffs,
        "fc_requests": [(r, force_continue_tally(request=r)) for r in requests],
        "can_request": can_request,
        "fc_why_not": fc_why_not,
        "resumptions": list(run.resumptions.order_by("created_at")),
        "production_approval": production_request_for_run(run_id=run.id),
        "options": [(name, json.dumps(value)) for name, value in (run.options or {}).items()],
        "done": run.state in (ReplayRun.State.DONE, ReplayRun.State.FAILED),
        "percent": _percent(run),
        "refusal": _refusal(run),
        "stale": replay_run_stale(run),
        "stale_seconds": replay_stale_seconds(),
        "can_requeue": _may_requeue(request.user, run),
    }


def _may_requeue(user: object, run: ReplayRun) -> bool:
    """Who may queue a stale run again: whoever may start a replay of its mode, or (a
    production run, started under a council approval) the person it was started for."""
    if run.mode == roles.MODE_PRODUCTION:
        return run.requested_by_id is not None and run.requested_by_id == getattr(user, "pk", 0)
    return run.mode in roles.replay_modes_for(user)  # type: ignore[arg-type]


#: checks after which steps have been re-executed (a refusal there is not "before any step")
STEP_CHECKS = frozenset({"steps", "final_answer", "timeout"})


def _refusal(run: ReplayRun) -> dict[str, object] | None:
    """Where a refused run stopped. A refusal is no verdict on the trace: the page shows it
    instead of a progress bar at 100% and of the authoritative label."""
    if run.status != "refused":
        return None
    checks = list((run.report or {}).get("checks") or [])
    failed = [c for c in checks if not c.get("ok")]
    return {
        "code": run.error_code,
        "check": str(failed[-1].get("name", "")) if failed else "",
        "broke_at": (run.report or {}).get("broke_at"),
        "before_steps": not any(c.get("name") in STEP_CHECKS for c in checks),
    }


def _percent(run: ReplayRun) -> int:
    if run.state == ReplayRun.State.DONE:
        return 100
    if not run.progress_total:
        return 0
    return min(99, int(100 * run.progress_done / run.progress_total))


@require_GET
@signed_in
def run_detail_view(request: HttpRequest, run_id: str) -> HttpResponse:
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    return partial_or_page(
        request, "console/run_report.html", "run-status", _run_context(request, run)
    )


@require_POST
@signed_in
def run_requeue_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """Queue a stale run again (its task was lost); answers with the run page."""
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    if not _may_requeue(request.user, run):
        raise PermissionDenied(f"your roles do not allow a {run.mode} replay")
    try:
        replay_run_requeue(run=run)
    except GovernanceError as exc:
        context = {"title": "Not queued again", "message": exc.message, "code": exc.code}
        return render(request, "console/error_page.html", context, status=409)
    return HttpResponseRedirect(reverse("run-detail", args=[run.id]), status=303)


@require_GET
@signed_in
def run_status_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """The polled progress region; once the run is done, htmx reloads the page for the report."""
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    context = _run_context(request, run)
    response = partial_or_page(request, "console/run_report.html", "run-status", context)
    if getattr(request, "htmx", False) and context["done"]:
        response["HX-Refresh"] = "true"
    return response


@require_GET
@signed_in
def run_value_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """One value of the report in full, by its JSON Pointer (a large diff side, on demand)."""
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    pointer = request.GET.get("pointer", "")
    try:
        value = pointer_get(run.report or {}, pointer)
    except PointerError as exc:
        refused = {"title": "No such value", "message": str(exc), "code": ""}
        return render(request, "console/error_page.html", refused, status=404)
    context = {"run": run, "pointer": pointer, "value": render_json(value)}
    return partial_or_page(request, "console/run_value.html", "value", context)


@require_GET
@signed_in
def run_report_tree_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """The report JSON as a tree to fold (console.jsonview): what report.json serves, to read."""
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    tree = json_tree(run.report) if run.report is not None else ""
    context = {
        "run": run,
        "tree": mark_safe(tree),  # noqa: S308 (json_tree escapes every key and value)
        "too_large": run.report is not None and not tree,
    }
    return render(request, "console/run_report_tree.html", context)


@require_GET
@signed_in
def run_report_json_view(request: HttpRequest, run_id: str) -> HttpResponse:
    run = roles.access_run_by_id(request.user, run_id, roles.BROWSE)
    if run.report is None:
        return JsonResponse(
            {"error_code": REPORT_NOT_READY, "message": f"replay {run.id} is {run.state}"},
            status=409,
        )
    response = HttpResponse(
        json.dumps(run.report, indent=2, ensure_ascii=False), content_type="application/json"
    )
    if request.GET.get("download"):
        name = f"replay-{run.trace.trace_id}-{run.id}.json"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
