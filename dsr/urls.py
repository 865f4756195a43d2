from __future__ import annotations

from django.urls import path

from dsr import views

urlpatterns = [
    path("", views.dsr_list_view, name="dsr-list"),
    path("new/", views.dsr_open_view, name="dsr-open"),
    path("<str:request_id>/", views.dsr_detail_view, name="dsr-detail"),
    path("<str:request_id>/identity/", views.dsr_identity_view, name="dsr-identity"),
    path("<str:request_id>/transition/", views.dsr_transition_view, name="dsr-transition"),
    path("<str:request_id>/approve/<str:purpose>/", views.dsr_approve_view, name="dsr-approve"),
]
