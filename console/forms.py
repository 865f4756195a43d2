from __future__ import annotations

from django import forms

from console.selectors import SORT_DEFAULT, VERDICT_ALIASES, SortError, TraceFilters, sort_parse
from replay.models import Trace

_REPLAYABLE = {"": None, "yes": True, "no": False}


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
        )
