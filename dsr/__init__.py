"""Data Subject Requests: legal requests, identity checks, four-eyes approvals (issue 14, D1)."""
