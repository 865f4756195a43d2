from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Replay Audit Console"

    def ready(self) -> None:
        from django.core.signals import request_started

        from replay.background import periodic_on_request

        # no broker: the serving process runs the periodic jobs itself (replay/background.py)
        request_started.connect(periodic_on_request, dispatch_uid="replay.background.periodic")
