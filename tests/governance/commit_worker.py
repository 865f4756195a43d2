"""A separate process for ``test_append_commit``: appends through the real services, each in
a transaction of its own (what a test's transaction cannot show), and prints the statements
each made as JSON.

    python -m tests.governance.commit_worker
"""

from __future__ import annotations

import json
import os


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    import django

    django.setup()
    from django.db import connection

    from core.ledger import codes
    from governance import services

    made: list[str] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        made.append(sql)
        return execute(sql, params, many, context)

    # the server key, then its lookup cached (after a key event the signer is looked up)
    for n in range(2):
        services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": n})
    runs = {}
    with connection.execute_wrapper(record):
        for name, call in (
            ("one", lambda: services.event_append(event_type=codes.PII_REVEALED, payload={})),
            (
                "keyed",
                lambda: services.event_append(
                    event_type=codes.PII_REVEALED, payload={}, idempotency_key="k-1"
                ),
            ),
            (
                "retried",
                lambda: services.event_append(
                    event_type=codes.PII_REVEALED, payload={}, idempotency_key="k-1"
                ),
            ),
            (
                "batch",
                lambda: services.events_append(
                    [{"event_type": codes.PII_REVEALED, "payload": {"i": i}} for i in range(3)]
                ),
            ),
        ):
            made.clear()
            result = call()
            seqs = [e.seq for e in result] if isinstance(result, list) else [result.seq]
            runs[name] = {
                "sql": list(made),
                "seqs": seqs,
                "in_transaction": connection.in_atomic_block,
            }
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
