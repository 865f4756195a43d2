"""Verifying the stored ledger: the whole chain streamed (in parallel worker processes for a
large ledger), the server signatures a checkpoint vouches for spared, or only the events after
a verification mark; and the verdict of a checkpoint check. The chain rules themselves are
the pure ``core.ledger.chain``."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from django.db import connection

from core.ledger import chain
from governance import transparency
from governance.ledger.keys import server_keys
from governance.models import GovernanceEvent

#: below this many events verification stays in one process (spawning costs ~0.3 s)
PARALLEL_MIN_EVENTS: Final = 20_000


def member_key_states(*, key_id: str | None = None) -> dict[str, chain.MemberKeyState]:
    """Member keys as the ledger's key events say they are (all of them, or one)."""
    events = GovernanceEvent.objects.filter(code__in=chain.MEMBER_KEY_CODES)
    if key_id is not None:
        events = events.filter(payload__key_id=key_id)
    keys = chain.MemberKeys()
    for seq, code, created_at, actor_id, payload in events.order_by("seq").values_list(
        "seq", "code", "created_at", "actor_id", "payload"
    ):
        keys.feed(seq, code, created_at, actor_id, payload)  # verify names what breaks a rule
    return keys.keys


def actor_keys() -> dict[str, bytes]:
    """Member public keys as the ledger announced them (not as the table holds them now)."""
    found: dict[str, bytes] = {}
    for key_id, state in member_key_states().items():
        try:
            found[key_id] = bytes.fromhex(state.public_key)
        except ValueError:
            continue  # an actor signature by this key is then named as unverifiable
    return found


def rows(
    *, chunk_size: int = 2000, after_seq: int = 0, upto_seq: int | None = None
) -> Iterator[tuple[Any, ...]]:
    """Every stored event (after ``after_seq``, through ``upto_seq``) as a tuple in
    ``chain.FIELDS`` order, streamed in seq order."""
    found = GovernanceEvent.objects.filter(seq__gt=after_seq)
    if upto_seq is not None:
        found = found.filter(seq__lte=upto_seq)
    return found.order_by("seq").values_list(*chain.FIELDS).iterator(chunk_size=chunk_size)


_SELECT_SQL: Final = (
    f"SELECT {', '.join(chain.FIELDS)} FROM governance_governanceevent ORDER BY seq"  # noqa: S608
)


def _raw_rows(chunk_size: int) -> Iterator[tuple[Any, ...]]:
    """PostgreSQL only: a server-side cursor with the payload left as JSON text.

    Half the cost per row of the ORM path; the payload is parsed by the worker processes
    (and here only for key events), so the streaming process stays out of their way.
    """
    from django.db import transaction

    with transaction.atomic():
        connection.ensure_connection()
        cur = connection.connection.cursor(name="governance_verify")
        cur.itersize = chunk_size
        try:
            cur.execute(_SELECT_SQL)
            yield from cur
        finally:
            cur.close()


def _counted(
    stream: Iterator[tuple[Any, ...]], progress: Callable[[int], None] | None, every: int
) -> Generator[tuple[Any, ...]]:
    """``stream`` as is, calling ``progress(rows so far)`` every ``every`` rows."""
    if progress is None:
        yield from stream
        return
    for seen, row in enumerate(stream, start=1):
        if seen % every == 0:
            progress(seen)
        yield row


def verify(
    *,
    workers: int | None = None,
    chunk_size: int = 2000,
    count: int | None = None,
    progress: Callable[[int], None] | None = None,
    progress_every: int | None = None,
    upto_seq: int | None = None,
    vouched: bool = True,
) -> chain.ChainResult:
    """Verify the whole stored ledger with the real rules of ``core.ledger.chain``.

    Rows are streamed from the database; the in-order checks run here while the per-event
    checks (hash, signatures; the expensive part) run in ``workers`` processes. ``workers``
    defaults to the CPU count for ledgers of at least PARALLEL_MIN_EVENTS events, else 1, and
    is 1 in a daemonic process (a Celery worker's child). ``upto_seq`` (one process only)
    stops at that seq.

    With ``vouched`` (the default) the largest checkpoint that vouches for the server
    signatures it covers (``transparency.vouching_checkpoint``: its note and its signatures
    digest checked, one Ed25519 each) spares the Ed25519 check of every event it covers. That
    walk is believed only when the chain verifies, the checkpoint's key was announced in it,
    and the events streamed give the checkpoint's Merkle root and signatures digest
    (``chain.Vouch``); otherwise (a tamper anywhere, a checkpoint that disagrees) the ledger
    is verified again the old way, one server signature check per event, so every verdict,
    break and code is the old way's. ``progress`` then counts again from the start.
    """
    if upto_seq is not None:
        workers = 1
    keys, members = server_keys(), actor_keys()
    if workers is None:
        size = count if count is not None else GovernanceEvent.objects.count()
        workers = (os.cpu_count() or 1) if size >= PARALLEL_MIN_EVENTS else 1
    if workers > 1 and multiprocessing.current_process().daemon:
        # a Celery prefork child is daemonic and may not start processes ("daemonic processes
        # are not allowed to have children"): the background verification runs in this one
        workers = 1
    every = progress_every or chunk_size
    vouch = transparency.vouching_checkpoint(upto_seq) if vouched else None
    if vouch is not None:
        result, linker = _walk(
            keys,
            members,
            workers=workers,
            chunk_size=chunk_size,
            upto_seq=upto_seq,
            progress=progress,
            every=every,
            vouch=vouch,
        )
        if result.ok and vouch.agrees() and vouch.key_id in linker.announced:
            return result
    result, _linker = _walk(
        keys,
        members,
        workers=workers,
        chunk_size=chunk_size,
        upto_seq=upto_seq,
        progress=progress,
        every=every,
        vouch=None,
    )
    return result


def _walk(
    keys: Mapping[str, chain.ServerKey],
    members: Mapping[str, bytes],
    *,
    workers: int,
    chunk_size: int,
    upto_seq: int | None,
    progress: Callable[[int], None] | None,
    every: int,
    vouch: chain.Vouch | None,
) -> tuple[chain.ChainResult, chain.Linker]:
    """One verification pass (see :func:`verify`); with ``vouch``, the server signatures of
    the events it covers are left to it (the caller checks ``vouch.agrees()``)."""
    signed_through = vouch.size if vouch is not None else 0
    linker = chain.Linker(keys)
    if workers <= 1:
        for row in _counted(rows(chunk_size=chunk_size, upto_seq=upto_seq), progress, every):
            if vouch is not None:
                vouch.feed(row)
            if linker.feed(row) is not None:
                break
            local = chain.check_row(row, keys, members, signed_through)
            if local is not None:
                return linker.result(local), linker
        return linker.result(), linker
    first_local: chain.Break | None = None
    pending: deque[Future[chain.Break | None]] = deque()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=chain.pool_init,
        initargs=(keys, members, signed_through),
    ) as pool:
        stream = (
            _raw_rows(chunk_size)
            if connection.vendor == "postgresql"
            else rows(chunk_size=chunk_size)
        )
        counted = _counted(stream, progress, every)
        with contextlib.closing(counted):  # an early stop must end the cursor's transaction
            while first_local is None and linker.broken is None:
                batch = list(itertools.islice(stream, chunk_size))
                if not batch:
                    break
                for row in batch:
                    if vouch is not None:
                        vouch.feed(row)
                    if linker.feed(row) is not None:
                        break
                pending.append(pool.submit(chain.pool_check, batch))
                while pending and (len(pending) > 2 * workers or pending[0].done()):
                    found = pending.popleft().result()
                    if found is not None:
                        first_local = found
                        break
        while first_local is None and pending:
            first_local = pending.popleft().result()
        for future in pending:
            future.cancel()
    return linker.result(first_local), linker


def key_rows_through(seq: int) -> Iterator[tuple[Any, ...]]:
    """The key events up to ``seq``, in seq order: what checking later events depends on."""
    return (
        GovernanceEvent.objects.filter(seq__lte=seq, code__in=sorted(chain.KEY_EVENT_CODES))
        .order_by("seq")
        .values_list(*chain.FIELDS)
        .iterator(chunk_size=2000)
    )


def verify_after(
    *,
    through_seq: int,
    head_hash: str,
    genesis_hash: str,
    progress: Callable[[int], None] | None = None,
    chunk_size: int = 2000,
    progress_every: int | None = None,
    upto_seq: int | None = None,
) -> chain.ChainResult:
    """Verify only the events after ``through_seq`` (through ``upto_seq``, else the newest),
    whose hash a verification mark vouches for: the chain from that hash onward, with the
    key state the earlier key events set."""
    keys = server_keys()
    linker = chain.resume_linker(
        key_rows_through(through_seq),
        server_keys=keys,
        through_seq=through_seq,
        head_hash=head_hash,
        genesis_hash=genesis_hash,
    )
    return chain.verify_after(
        linker,
        _counted(
            rows(chunk_size=chunk_size, after_seq=through_seq, upto_seq=upto_seq),
            progress,
            progress_every or chunk_size,
        ),
        server_keys=keys,
        actor_keys=actor_keys(),
    )


@dataclass(frozen=True, slots=True)
class CheckpointVerdict:
    ok: bool
    code: str | None
    message: str
    checkpoint_size: int | None = None
    ledger_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "checkpoint_size": self.checkpoint_size,
            "ledger_size": self.ledger_size,
        }
