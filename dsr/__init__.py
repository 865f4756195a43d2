"""Data Subject Requests: legal requests, evidence bundles, their PDF and offline verifier."""
