from __future__ import annotations

from django.urls import path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from console.views import auth, traces

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="trace-list", permanent=False)),
    # sign-in and the second factor
    path("accounts/login/", auth.login_view, name="login"),
    path("accounts/logout/", auth.logout_view, name="logout"),
    path("accounts/2fa/setup/", auth.otp_setup_view, name="otp-setup"),
    path("accounts/2fa/verify/", auth.otp_verify_view, name="otp-verify"),
    # traces
    path("traces/", traces.trace_list_view, name="trace-list"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
]
