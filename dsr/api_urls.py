"""The legal requests' API endpoints, under ``/api/legal-requests/`` (``console/api/urls.py``
mounts them by dotted path, as ``config/urls.py`` mounts ``dsr.urls``)."""

from __future__ import annotations

from django.urls import path

from dsr import api

urlpatterns = [
    path("", api.LegalRequestListApi.as_view(), name="api-legal-request-list"),
    path(
        "<str:request_id>/",
        api.LegalRequestDetailApi.as_view(),
        name="api-legal-request-detail",
    ),
    path(
        "<str:request_id>/identity/",
        api.LegalRequestIdentityApi.as_view(),
        name="api-legal-request-identity",
    ),
    path(
        "<str:request_id>/transition/",
        api.LegalRequestTransitionApi.as_view(),
        name="api-legal-request-transition",
    ),
    path(
        "<str:request_id>/bundle/",
        api.LegalRequestBundleApi.as_view(),
        name="api-legal-request-bundle",
    ),
    path(
        "<str:request_id>/bundle/file/",
        api.LegalRequestBundleFileApi.as_view(),
        name="api-legal-request-bundle-file",
    ),
    path(
        "<str:request_id>/releases/",
        api.LegalRequestReleaseApi.as_view(),
        name="api-legal-request-release",
    ),
    path(
        "<str:request_id>/erasure/",
        api.LegalRequestErasureApi.as_view(),
        name="api-legal-request-erasure",
    ),
    path(
        "<str:request_id>/approvals/",
        api.LegalRequestApprovalApi.as_view(),
        name="api-legal-request-approve",
    ),
]
