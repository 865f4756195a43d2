"""Which governance capacities a person holds: admin and council are Django Groups.

The console's permission matrix (``console/roles.py``) is the single place that decides what a
request may do, including the second-factor rule; governance only needs to know whether the
signer of an approval holds the role they signed in, and asks the groups directly (governance
never imports console). The group names are the same strings as the console's role names.
"""

from __future__ import annotations

from typing import Any, Final

AUDITOR: Final = "auditor"  # may ask the council for a production replay
ADMIN: Final = "admin"
COUNCIL: Final = "council"


def user_has_role(user: Any, role: str) -> bool:
    """True when an active user belongs to the Group named ``role``."""
    if user is None or not getattr(user, "is_active", False):
        return False
    return user.groups.filter(name=role).exists()
