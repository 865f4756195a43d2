"""People's API tokens from the command line: create (printed once), list, revoke."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from core.ledger.codes import GovernanceError
from governance import selectors as gov
from governance import services as gov_services

ACTOR_LABEL = "manage.py api_token"
MESSAGE_NO_USER = "no user {username!r}"
MESSAGE_NO_TOKEN = "{username} has no API token {ref!r} (give its id or its prefix)"  # noqa: S105 - not a secret


class Command(BaseCommand):
    help = "A person's API tokens: create (the token is printed once), list, revoke."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="a new token; only its SHA-256 is kept")
        create.add_argument("username")
        create.add_argument("--name", default="", help="what the token is for")
        listing = sub.add_parser("list", help="a person's tokens (prefix, dates, state)")
        listing.add_argument("username")
        revoke = sub.add_parser("revoke", help="a revoked token authenticates no more")
        revoke.add_argument("username")
        revoke.add_argument("token", help="the token's id or prefix")

    def handle(self, *args, action, username, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(MESSAGE_NO_USER.format(username=username), returncode=2)
        if action == "create":
            row, token = gov_services.api_token_create(
                user=user, name=options["name"][:100], actor_label=ACTOR_LABEL
            )
            self.stderr.write(f"API token {row.pk} for {username} (shown once, keep it safe):")
            self.stdout.write(token)
        elif action == "list":
            for row in gov.api_tokens_of(user=user):
                used = row.last_used_at.isoformat() if row.last_used_at else "never"
                state = f"revoked {row.revoked_at.isoformat()}" if row.revoked_at else "active"
                self.stdout.write(
                    f"{row.pk}\t{row.prefix}\t{row.name}\tcreated {row.created_at.isoformat()}\t"
                    f"last used {used}\t{state}"
                )
        else:
            ref = options["token"]
            rows = gov.api_tokens_of(user=user)
            row = rows.filter(pk=int(ref)).first() if ref.isdigit() else None
            row = row or rows.filter(prefix=ref).first()
            if row is None:
                raise CommandError(
                    MESSAGE_NO_TOKEN.format(username=username, ref=ref), returncode=1
                )
            try:
                row = gov_services.api_token_revoke(token=row, actor_label=ACTOR_LABEL)
            except GovernanceError as exc:
                raise CommandError(f"{exc.code}: {exc.message}", returncode=1) from None
            self.stdout.write(f"revoked API token {row.pk} ({row.prefix}) of {username}")
