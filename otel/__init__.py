"""OpenTelemetry GenAI traces received over OTLP/HTTP: the raw bodies stored first, then
spans grouped by trace id in the background, sealed into one record per trace version and
stored as a trace of the ``otel-genai`` format (``core/formats/otel/``)."""
