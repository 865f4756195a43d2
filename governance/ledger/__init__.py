"""The ledger's database machinery, one module per concern; services and selectors call it
through the names below. The chain rules themselves are in the pure ``core.ledger.chain``.

- :mod:`governance.ledger.keys`: the server key in use and every server key;
- :mod:`governance.ledger.lock`: the ledger-wide lock and the head;
- :mod:`governance.ledger.append`: serialised appends (the lock, the head, the draft, the
  event and its Merkle nodes written together);
- :mod:`governance.ledger.verify`: the stored chain verified (streamed, in parallel, vouched
  for by a checkpoint, or after a verification mark);
- :mod:`governance.ledger.tables`: the tables the decisions depend on, reconciled with it.
"""

from governance.ledger.append import (
    SYSTEM_ACTOR,
    Entry,
    _keys_by_id,
    append,
    append_and_commit,
    append_many,
    event_appended,
    insert,
    lock_and_head,
    values_row,
)
from governance.ledger.keys import (
    SERVER_KEY_PREFIX,
    _private_keys,
    private_key_of,
    server_key_create,
    server_key_current,
    server_key_payload,
    server_keys,
)
from governance.ledger.lock import ADVISORY_LOCK_ID, Head, head, head_row, lock
from governance.ledger.tables import (
    event_type_of,
    installed_kinds,
    opened_by_register,
    tables_check,
    tables_register,
    verify_all,
    vote_events,
    vote_rows,
)
from governance.ledger.verify import (
    PARALLEL_MIN_EVENTS,
    CheckpointVerdict,
    actor_keys,
    key_rows_through,
    member_key_states,
    rows,
    verify,
    verify_after,
)

__all__ = [
    "ADVISORY_LOCK_ID",
    "PARALLEL_MIN_EVENTS",
    "SERVER_KEY_PREFIX",
    "SYSTEM_ACTOR",
    "CheckpointVerdict",
    "Entry",
    "Head",
    "_keys_by_id",
    "_private_keys",
    "actor_keys",
    "append",
    "append_and_commit",
    "append_many",
    "event_appended",
    "event_type_of",
    "head",
    "head_row",
    "insert",
    "installed_kinds",
    "key_rows_through",
    "lock",
    "lock_and_head",
    "member_key_states",
    "opened_by_register",
    "private_key_of",
    "rows",
    "server_key_create",
    "server_key_current",
    "server_key_payload",
    "server_keys",
    "tables_check",
    "tables_register",
    "values_row",
    "verify",
    "verify_after",
    "verify_all",
    "vote_events",
    "vote_rows",
]
