from django.apps import AppConfig


class PrivacyConfig(AppConfig):
    name = "privacy"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Personal data"

    def ready(self) -> None:
        from privacy import ingest
        from replay.signals import trace_expired, trace_stored

        trace_stored.connect(ingest.on_trace_stored, dispatch_uid="privacy.index")
        trace_expired.connect(ingest.on_trace_expired, dispatch_uid="privacy.expiry")
        ingest.install_reader()
