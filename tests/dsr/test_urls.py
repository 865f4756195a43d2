"""Where legal requests' API endpoints are served: the paths and names the docs and clients use
(``dsr/api_urls.py``, mounted by the API's URLconf without importing ``dsr``)."""

from __future__ import annotations

import pytest
from django.urls import resolve, reverse

from dsr import api

ID = "0b6c5c7e-6f44-4a39-9b1c-2f8f5a3b9c11"
ENDPOINTS = [
    ("api-legal-request-list", {}, "/api/legal-requests/", api.LegalRequestListApi),
    (
        "api-legal-request-detail",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/",
        api.LegalRequestDetailApi,
    ),
    (
        "api-legal-request-identity",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/identity/",
        api.LegalRequestIdentityApi,
    ),
    (
        "api-legal-request-transition",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/transition/",
        api.LegalRequestTransitionApi,
    ),
    (
        "api-legal-request-bundle",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/bundle/",
        api.LegalRequestBundleApi,
    ),
    (
        "api-legal-request-bundle-file",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/bundle/file/",
        api.LegalRequestBundleFileApi,
    ),
    (
        "api-legal-request-release",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/releases/",
        api.LegalRequestReleaseApi,
    ),
    (
        "api-legal-request-erasure",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/erasure/",
        api.LegalRequestErasureApi,
    ),
    (
        "api-legal-request-approve",
        {"request_id": ID},
        f"/api/legal-requests/{ID}/approvals/",
        api.LegalRequestApprovalApi,
    ),
]


@pytest.mark.parametrize(
    ("name", "kwargs", "url", "view"), ENDPOINTS, ids=[e[0] for e in ENDPOINTS]
)
def test_it_serves_each_legal_request_endpoint_at_its_documented_path(name, kwargs, url, view):
    assert reverse(name, kwargs=kwargs) == url
    match = resolve(url)
    assert match.url_name == name
    assert match.func.view_class is view
    assert match.kwargs == kwargs
