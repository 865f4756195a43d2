"""The console's URLs plus one view that fails, for the 500 page tests (and its handlers)."""

from __future__ import annotations

from django.urls import path

from config.urls import handler400, handler403, handler404, handler500, urlpatterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def boom(request):
    raise RuntimeError("the database went away (a test's failure)")


urlpatterns = [*urlpatterns, path("boom/", boom), path("api/boom/", boom)]
