"""Signals replay sends for apps that build on stored traces (replay imports none of them).

``trace_stored(sender=Trace, trace=row, opened=..., parsed=...)``: a new file was stored,
inside the transaction that stores it (a receiver that raises refuses the upload: nothing is
stored); ``opened()`` opens the uploaded bytes (a receiver may rewrite the stored copy from
them); ``parsed`` is what the format's ``parse`` read them as (its own type: a receiver checks
it before using it, and reads ``opened()`` when it is not what it wants).

``trace_expired(sender=Trace, trace=row)``: retention made the trace a tombstone
(``replay.expiry``), inside that transaction; a receiver removes what it keeps of the trace's
content (a receiver that raises undoes the expiry).
"""

from __future__ import annotations

from django.dispatch import Signal

trace_stored = Signal()
trace_expired = Signal()
