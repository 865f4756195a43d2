"""Who acts: whether a person acting outside a browser session (a command's ``--user``) may
do something per the roles matrix, and how the system is named in the ledger when no one does."""

from __future__ import annotations

from typing import Any

from core.ledger import codes
from core.ledger import roles as matrix
from governance import membership

# --- messages (asserted verbatim in tests) ----------------------------------------------------
ACTION_ROLE_MESSAGE = (
    "{user} may not {action}: their roles per the ledger ({roles}) do not allow it"
)
#: how a management command run without --user is named in the ledger (it acts as the system)
CLI_SYSTEM_ACTOR = "system:cli"


def _system_label(actor: Any, actor_label: str | None) -> str | None:
    return actor_label if actor is None else None


def actor_require(*, actor: Any, action: str) -> None:
    """A person acting outside a browser session (a command's ``--user``) may do ``action``
    per the roles matrix, with the roles the ledger says they hold; the system (no actor) may.

    Shell access to the server is a stronger credential than a signed-in session, so strong
    roles count here without a second factor; what counts is that the ledger records them.
    """
    if actor is None:
        return
    membership.forget(actor)
    held = membership.roles_held(actor)
    if not matrix.allowed(held, action):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE,
            ACTION_ROLE_MESSAGE.format(
                user=actor.get_username(),
                action=matrix.describe(action),
                roles=", ".join(sorted(held)) or "none",
            ),
        )
