"""Who may see a legal request, and the request by its id after the role check (the web's
rules of ``console.roles`` applied to ``dsr``'s model: the console imports nothing of ``dsr``).

Missing versus forbidden, as ``console.roles`` says: the role first, so someone without it gets
403 whether or not the request exists; then 404 for one that does not.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from console import roles
from dsr.models import LegalRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    User = AbstractBaseUser | AnonymousUser


def access_legal_request_by_id(
    user: User, request_id: uuid.UUID | str, action: str = roles.DSR
) -> LegalRequest:
    """A legal request (Data Subject Request), after ``action``'s role check."""
    roles.require(user, action)
    rows = LegalRequest.objects.select_related("requested_by", "identity_verified_by")
    return roles.by_uuid_after_check(rows, request_id, "legal request")


def may_see_legal_requests(user: User) -> bool:
    """Legal staff and admins (DSR), and whoever signs approvals of them (DSR_APPROVE)."""
    return roles.can(user, roles.DSR) or roles.can(user, roles.DSR_APPROVE)
