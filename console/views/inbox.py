"""The inbox page: the governed requests of every kind waiting for the signed-in person's
signature, oldest first (``governance.requests.inbox``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console import roles
from console.views.common import signed_in
from governance.requests import inbox
from governance.requests.builtin import kinds

MESSAGE_SIGNS_NOTHING = (
    "Your roles ({roles}) sign no governed request, so nothing will ever wait here for you."
)
MESSAGE_NOTHING_WAITS = "Nothing is waiting for your signature."


@require_GET
@signed_in
def inbox_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.INBOX)
    in_effect = roles.roles(request.user)
    signs = inbox.signs_anything(in_effect)
    items = inbox.waiting_for(request.user, roles=in_effect) if signs else []
    request.inbox_waiting = items  # type: ignore[attr-defined]  # the layout counts these
    # (a session whose admin or council role awaits its second factor never gets here: the
    # OTP middleware sends it to verify first)
    if signs:
        empty = MESSAGE_NOTHING_WAITS
    else:
        empty = MESSAGE_SIGNS_NOTHING.format(roles=", ".join(sorted(in_effect)))
    return render(
        request,
        "console/inbox.html",
        {
            "items": items,
            "empty": empty,
            "kinds": [k for k in kinds() if k.signer_roles() & in_effect],
        },
    )
