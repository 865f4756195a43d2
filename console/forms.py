from __future__ import annotations

from django import forms

from console.selectors import (
    OTEL_LABELS,
    SORT_DEFAULT,
    VERDICT_ALIASES,
    SortError,
    TraceFilters,
    sort_parse,
)
from core.formats.otel import facts as otel_facts
from replay.models import Trace

_REPLAYABLE = {"": None, "yes": True, "no": False}


def otel_value_valid(value: str) -> None:
    """A filter's value is one a trace's facts can hold (``core.formats.otel.facts``): no
    control or invisible character (its length is the field's ``max_length``, a NUL the
    field's own refusal)."""
    problem = None if "\x00" in value else otel_facts.invisible(value)
    if problem is not None:
        raise forms.ValidationError(f"not a value a trace holds: {problem}")


def _otel_field(kind: str) -> forms.CharField:
    label, help_text = OTEL_LABELS[kind]
    return forms.CharField(
        required=False,
        max_length=otel_facts.MAX_VALUE,
        label=f"OpenTelemetry: {label}",
        help_text=help_text,
        validators=[otel_value_valid],
    )


class TraceFilterForm(forms.Form):
    format = forms.CharField(required=False, max_length=32)
    verdict = forms.ChoiceField(
        required=False, choices=[("", "any verdict"), *Trace.Status.choices]
    )
    replayable = forms.ChoiceField(
        required=False, choices=[("", "any"), ("yes", "replayable"), ("no", "not replayable")]
    )
    date_from = forms.DateField(required=False, label="uploaded from")
    date_to = forms.DateField(required=False, label="uploaded to")
    q = forms.CharField(required=False, max_length=255, label="search")
    # OpenTelemetry traces' facts (console.selectors.OTEL_FILTERS)
    service = _otel_field("service")
    model = _otel_field("model")
    operation = _otel_field("operation")
    conversation = _otel_field("conversation")
    agent = _otel_field("agent")
    cursor = forms.CharField(required=False, max_length=512)
    sort = forms.CharField(required=False, max_length=32)

    def __init__(self, data=None, *args, **kwargs):
        if data is not None and data.get("verdict") in VERDICT_ALIASES:
            data = data.copy()
            data["verdict"] = VERDICT_ALIASES[data["verdict"]]
        super().__init__(data, *args, **kwargs)

    def clean_sort(self) -> str:
        sort = self.cleaned_data.get("sort") or SORT_DEFAULT
        try:
            sort_parse(sort)
        except SortError as exc:
            raise forms.ValidationError(str(exc)) from None
        return sort

    def filters(self) -> TraceFilters:
        data = self.cleaned_data
        return TraceFilters(
            format=data.get("format") or "",
            verdict=data.get("verdict") or "",
            replayable=_REPLAYABLE[data.get("replayable") or ""],
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            q=(data.get("q") or "").strip(),
            service=data.get("service") or "",
            model=data.get("model") or "",
            operation=data.get("operation") or "",
            conversation=data.get("conversation") or "",
            agent=data.get("agent") or "",
        )
