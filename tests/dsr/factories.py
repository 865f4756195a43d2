"""DSR personas: lena and luke from legal open requests; bob and grace are admins who sign
(each with a key another admin confirmed); carol and dave sit on the council."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from core.ledger import signing
from dsr import services
from dsr.models import LegalRequest
from tests.governance import factories as gov_factories
from tests.governance.factories import Signer, enrol

gov_factories.PERSONAS.setdefault("lena", ("legal",))
gov_factories.PERSONAS.setdefault("luke", ("legal",))


def person(name: str) -> User:
    return gov_factories.person(name)


def opened(
    *,
    by: str = "lena",
    identifiers: tuple[str, ...] = ("Jane.Doe@Example.com",),
    kind: str = LegalRequest.Kind.BOTH,
    basis: str = "GDPR Art. 15 and 17",
) -> LegalRequest:
    return services.legal_request_open(
        actor=person(by), identifiers=identifiers, kind=kind, legal_basis=basis
    )


def verified(request: LegalRequest, *, by: str = "lena") -> LegalRequest:
    return services.legal_request_identity_verify(
        request=request, actor=person(by), method="passport checked by video call"
    )


def signed(signer: Signer, request: LegalRequest, purpose: str, **kwargs: Any) -> dict[str, Any]:
    request = LegalRequest.objects.get(pk=request.pk)
    return signer.sign(services.approval_payload_for(request=request, purpose=purpose, **kwargs))


__all__ = ["enrol", "opened", "person", "signed", "signing", "verified"]
