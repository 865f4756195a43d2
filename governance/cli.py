"""What the management commands that act for a person share (``manage.py governance``, ``dsr``,
``replay``): a refusal is printed as ``CODE: message`` on stderr and exits 1; a name that
matches nothing (a user, a request) is a usage error and exits 2."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, OutputWrapper

from core.ledger import codes
from governance import services

USER_UNKNOWN_MESSAGE = "no user named {username!r}"


@contextmanager
def refusals_exit_1(stderr: OutputWrapper) -> Iterator[None]:
    """A governance refusal inside ends the command: ``CODE: message`` on stderr, exit 1."""
    try:
        yield
    except codes.GovernanceError as exc:
        stderr.write(f"{exc.code}: {exc.message}")
        sys.exit(1)


def user_named(username: str, *, action: str | None = None) -> Any:
    """The user named ``username`` (else a usage error, exit 2); with ``action``, refused
    (``REQUEST_ROLE``) unless the roles the ledger records for them allow it."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(USER_UNKNOWN_MESSAGE.format(username=username), returncode=2)
    if action is not None:
        services.actor_require(actor=user, action=action)
    return user


def is_uuid(value: str) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


class ActionCommand(BaseCommand):
    """A command whose first argument (``action``) names its sub-command, run by the method
    ``do_<action>`` (dashes as underscores) with the remaining options."""

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        handler = getattr(self, "do_" + action.replace("-", "_"))
        with refusals_exit_1(self.stderr):
            handler(**options)
