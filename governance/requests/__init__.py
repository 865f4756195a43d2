"""Governed requests: every action that waits for signatures, one kind module each behind one
interface (:mod:`core.ledger.requests`) and one registry
(:func:`governance.requests.builtin.kinds`), and the inbox that lists, across kinds, what
waits for one person's signature (:mod:`governance.requests.inbox`).

Kept light: importing the pure protocol must not import Django.
"""
