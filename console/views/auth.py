"""Sign-in, sign-out and the TOTP second factor (set-up with a QR code, verification)."""

from __future__ import annotations

import base64

import segno
from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_otp import login as otp_login
from django_otp import verify_token

from console.models import EncryptedTOTPDevice
from console.otp import code_already_used
from console.signin import (
    MESSAGE_LOCKED_SECOND_FACTOR,
    backoff_message,
    backoff_wait,
    failure_record,
    locked_message,
    locked_wait,
    second_factor_mark,
)

MESSAGE_BAD_CODE = "That code is not valid. Enter the current 6-digit code from your authenticator."
MESSAGE_CODE_THROTTLED = "Too many wrong codes. Wait {seconds} seconds before the next try."
MESSAGE_ALREADY_ENROLLED = "You already have an authenticator; verify with it instead."
MESSAGE_CODE_USED = "This code was already used; wait for the next one."


def _next_url(request: HttpRequest) -> str:
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return resolve_url(settings.LOGIN_REDIRECT_URL)


def _second_factor_login(request: HttpRequest, form: AuthenticationForm) -> bool:
    """A locked pair's way in: the right password and a valid code, both in this request.

    The code is checked only once the password is right, so nobody without the password can
    spend the device's own throttle. On success the session is signed in *and* verified.
    """
    token = request.POST.get("token", "").strip()
    if not token or not form.is_valid():
        return False
    user = form.get_user()
    device = _confirmed_device(user)
    if device is None or verify_token(user, device.persistent_id, token) is None:
        return False
    login(request, user)
    otp_login(request, device)
    request.session.cycle_key()
    return True


@never_cache
@require_http_methods(["GET", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    form = AuthenticationForm(request, data=request.POST if request.method == "POST" else None)
    status = 200
    locked = ""
    second_factor = False
    if request.method == "POST":
        # django-axes counts each wrong password (user_login_failed) and clears the pair on
        # success (user_logged_in); console.signin says how, and why a code opens a lock.
        username = request.POST.get("username", "")
        wait = locked_wait(request, username)
        if wait and not request.POST.get("token", "").strip():
            # A password alone is refused before it is even checked, so a locked pair learns
            # nothing from it.
            locked = locked_message(wait)
            second_factor = True
            status = 429
        elif wait:
            backoff = backoff_wait(request, username)
            if backoff:
                locked = backoff_message(backoff)
            else:
                second_factor_mark(request)
                if _second_factor_login(request, form):
                    return HttpResponseRedirect(_next_url(request))
                if form.is_valid():  # the password was right, the code was not
                    failure_record(request, username)
                # the same answer whichever of password and code was wrong
                locked = locked_message(locked_wait(request, username) or wait)
            second_factor = True
            status = 429
        elif form.is_valid():
            login(request, form.get_user())
            return HttpResponseRedirect(_next_url(request))
    context = {
        "form": form,
        "locked": locked,
        "second_factor": second_factor,
        "second_factor_hint": MESSAGE_LOCKED_SECOND_FACTOR,
        "next": _next_url(request),
    }
    return render(request, "console/login_anyone.html", context, status=status)


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    logout(request)
    return HttpResponseRedirect(resolve_url(settings.LOGOUT_REDIRECT_URL))


def _confirmed_device(user) -> EncryptedTOTPDevice | None:
    # through the console's model, whose seed is sealed at rest (console.otp)
    return EncryptedTOTPDevice.objects.filter(user=user, confirmed=True).order_by("id").first()


def _qr_svg(device: EncryptedTOTPDevice) -> str:
    # segno's inline SVG uses attributes only (no style=), so the strict CSP holds.
    return segno.make(device.config_url, error="m").svg_inline(scale=4, dark="#111")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def otp_setup_view(request: HttpRequest) -> HttpResponse:
    user = request.user
    if _confirmed_device(user) is not None:
        # Enrolling a second device with only a password would bypass the first one.
        return render(
            request,
            "console/otp_setup.html",
            {"error": MESSAGE_ALREADY_ENROLLED, "next": _next_url(request)},
            status=409,
        )
    device = EncryptedTOTPDevice.objects.filter(user=user, confirmed=False).first()
    if device is None:
        device = EncryptedTOTPDevice.objects.create(user=user, name="console", confirmed=False)
    error = ""
    status = 200
    if request.method == "POST":
        token = request.POST.get("token", "").strip()
        if device.verify_token(token):
            device.confirmed = True
            device.save(update_fields=["confirmed"])
            otp_login(request, device)
            request.session.cycle_key()  # a verified session never keeps its earlier key
            return HttpResponseRedirect(_next_url(request))
        error = MESSAGE_BAD_CODE
        status = 400
    context = {
        "qr_svg": _qr_svg(device),
        "secret": base64.b32encode(device.bin_key).decode(),
        "error": error,
        "next": _next_url(request),
    }
    return render(request, "console/otp_setup.html", context, status=status)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def otp_verify_view(request: HttpRequest) -> HttpResponse:
    device = _confirmed_device(request.user)
    if device is None:
        return HttpResponseRedirect(resolve_url("otp-setup") + "?" + request.GET.urlencode())
    error = ""
    status = 200
    if request.method == "POST":
        allowed, info = device.verify_is_allowed()
        if not allowed:
            wait = (info or {}).get("locked_until")
            seconds = 1
            if wait is not None:
                from django.utils import timezone

                seconds = max(1, int((wait - timezone.now()).total_seconds()) + 1)
            error = MESSAGE_CODE_THROTTLED.format(seconds=seconds)
            status = 429
        else:
            token = request.POST.get("token", "").strip()
            verified = verify_token(request.user, device.persistent_id, token)
            if verified is not None:
                otp_login(request, verified)
                request.session.cycle_key()  # a verified session never keeps its earlier key
                return HttpResponseRedirect(_next_url(request))
            used = code_already_used(device, token)
            error = MESSAGE_CODE_USED if used else MESSAGE_BAD_CODE
            status = 400
    context = {"error": error, "next": _next_url(request)}
    return render(request, "console/otp_verify.html", context, status=status)
