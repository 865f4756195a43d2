"""Subjects by opaque ref: created with their own AES-256-GCM key, found by a keyed digest.

The identifier is kept only encrypted under the subject's key; the lookup digest is an
HMAC under the server's secret (``PRIVACY_SECRET``), useless without it. The subject key is
kept wrapped under the master key (``PRIVACY_MASTER_KEY``), in a table of its own.
"""

from __future__ import annotations

import base64
import secrets

from django.conf import settings
from django.db import IntegrityError, transaction

from core.privacy import crypto
from privacy.models import Subject, SubjectKey

REF_PREFIX = "subj_"


def _secret() -> bytes:
    return crypto.stretch("lookup\x00" + settings.PRIVACY_SECRET)


def _master() -> bytes:
    return crypto.stretch("master\x00" + settings.PRIVACY_MASTER_KEY)


def new_ref() -> str:
    return REF_PREFIX + base64.b32encode(secrets.token_bytes(20)).decode().lower()[:26]


def _wrap(key: bytes, aad: bytes) -> bytes:
    nonce, ct = crypto.seal(_master(), key, aad)
    return nonce + ct


def subject_key(subject: Subject) -> bytes | None:
    """The subject's AES key, or None once destroyed."""
    return unwrap_key(subject.ref, subject.key.wrapped)


def unwrap_key(ref: str, wrapped: bytes | memoryview | None) -> bytes | None:
    """:func:`subject_key` from the subject's ref and its key's ``wrapped`` column."""
    if wrapped is None:
        return None
    wrapped = bytes(wrapped)
    return crypto.open_sealed(_master(), wrapped[:12], wrapped[12:], b"key:" + ref.encode())


def _identifier_aad(ref: str) -> bytes:
    return b"identifier:" + ref.encode()


def ref_for(identifier: str) -> str:
    """The subject's ref, the subject (and its key) created on first sight."""
    normal = crypto.normalise(identifier)
    if not normal:
        raise ValueError("an empty subject identifier")
    digest = crypto.lookup_digest(_secret(), normal)
    found = Subject.objects.filter(lookup_digest=digest).values_list("ref", flat=True).first()
    if found is not None:
        return found
    ref = new_ref()
    key = crypto.new_key()
    nonce, ct = crypto.seal(key, normal.encode(), _identifier_aad(ref))
    try:
        with transaction.atomic():
            row_key = SubjectKey.objects.create(wrapped=_wrap(key, b"key:" + ref.encode()))
            Subject.objects.create(
                ref=ref,
                lookup_digest=digest,
                key=row_key,
                identifier_nonce=nonce,
                identifier_ciphertext=ct,
            )
    except IntegrityError:  # created by a concurrent caller
        return Subject.objects.get(lookup_digest=digest).ref
    return ref


def lookup(identifier: str) -> str | None:
    """The ref of a subject held (not erased), without creating one."""
    normal = crypto.normalise(identifier)
    if not normal:
        return None
    digest = crypto.lookup_digest(_secret(), normal)
    return Subject.objects.filter(lookup_digest=digest).values_list("ref", flat=True).first()


def identifier(ref: str) -> str | None:
    """The decrypted identifier; None once erased (or for an unknown ref)."""
    subject = Subject.objects.select_related("key").filter(ref=ref).first()
    if subject is None or subject.identifier_ciphertext is None or subject.identifier_nonce is None:
        return None
    key = subject_key(subject)
    if key is None:
        return None
    return crypto.open_sealed(
        key,
        bytes(subject.identifier_nonce),
        bytes(subject.identifier_ciphertext),
        _identifier_aad(ref),
    ).decode()
