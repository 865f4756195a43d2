"""Data Subject Requests: legal requests, identity checks, four-eyes approvals, evidence
bundles, their PDF and offline verifier, erasure orchestration (issue 14)."""
