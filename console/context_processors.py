from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console import roles


def console(request: HttpRequest) -> dict[str, Any]:
    """What the layout needs to draw navigation: the user's roles and allowed actions.

    Navigation only hides links; every view still checks the matrix itself.
    """
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"console_roles": [], "console_can": {}}
    return {
        "console_roles": sorted(roles.roles(user)),
        "console_can": {action: roles.can(user, action) for action in roles.ACTIONS},
    }
