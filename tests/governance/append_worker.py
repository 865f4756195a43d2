"""A separate process that appends governance events (the concurrency test's writers).

    python -m tests.governance.append_worker COUNT LABEL START_FILE [BATCH]

Waits until START_FILE exists so every writer starts at once, then appends COUNT events
through the real service, each in its own durable transaction, or BATCH events per
transaction (``services.events_append``: one hold of the ledger lock each).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> None:
    count, label, start = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    import django

    django.setup()
    from core.ledger import codes
    from governance import services

    while not start.exists():
        time.sleep(0.005)
    if batch > 1:
        for first in range(0, count, batch):
            services.events_append(
                [
                    {
                        "event_type": codes.PII_REVEALED,
                        "payload": {"writer": label, "n": n},
                        "actor_label": label,
                    }
                    for n in range(first, min(count, first + batch))
                ]
            )
        return
    for n in range(count):
        services.event_append(
            event_type=codes.PII_REVEALED,
            payload={"writer": label, "n": n},
            actor_label=label,
        )


if __name__ == "__main__":
    main()
