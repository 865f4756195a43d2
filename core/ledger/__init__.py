"""The governance ledger's rules: the hash chain, signing, the event and refusal codes,
the roles matrix, reconciling tables with the ledger, and the interface of a governed
request kind. Pure (no Django)."""
