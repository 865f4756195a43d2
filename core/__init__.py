"""The pure core: everything that needs neither Django nor a database.

Canonical JSON (``core.canonical``), the verdict error codes (``core.errors``), the
trace formats (``core.formats``), the replay engine with its reports, diffs, verdicts
and trace index (``core.replay``), the ledger's hash chain, signing, codes, roles and
the governed requests' interface (``core.ledger``), privacy's crypto and spans
(``core.privacy``), and the evidence bundle format with its offline checker
(``core.bundle``). The Django apps (``replay``, ``governance``, ``privacy``, ``dsr``,
``console``) import it, never the reverse: import-linter's ``pure-core`` and ``apps``
contracts in pyproject.toml hold it so (``make lint``).
"""
