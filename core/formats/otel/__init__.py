"""OpenTelemetry GenAI traces: OTLP span exports (``otlp``), each span normalised to one
record (``mapping``), the spans of one trace sealed into one record (``record``), the audit
checks over it (``audit``) and the format object behind the one format interface
(``adapter``, name ``otel-genai``).

Pure: no Django.
"""
