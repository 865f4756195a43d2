from __future__ import annotations

from django.urls import path

from console.views import requests
from dsr import views

urlpatterns = [
    path("", views.dsr_list_view, name="dsr-list"),
    path("new/", views.dsr_open_view, name="dsr-open"),
    path("<str:request_id>/", views.dsr_detail_view, name="dsr-detail"),
    path("<str:request_id>/identity/", views.dsr_identity_view, name="dsr-identity"),
    path("<str:request_id>/transition/", views.dsr_transition_view, name="dsr-transition"),
    path("<str:request_id>/bundle/", views.dsr_bundle_view, name="dsr-bundle"),
    path(
        "<str:request_id>/bundle/download/",
        views.dsr_bundle_download_view,
        name="dsr-bundle-download",
    ),
    path("<str:request_id>/bundle/pdf/", views.dsr_bundle_pdf_view, name="dsr-bundle-pdf"),
    path("<str:request_id>/release/", views.dsr_release_view, name="dsr-release"),
    path("<str:request_id>/erase/", views.dsr_erase_view, name="dsr-erase"),
    # an approval's old page: it moved to /requests/legal-<purpose>/<id>/ (issue 19)
    path(
        "<str:request_id>/approve/<str:purpose>/",
        requests.legacy_legal_approval_view,
        name="dsr-approve",
    ),
]
