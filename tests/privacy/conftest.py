from tests.console.conftest import (  # noqa: F401 - the console's fixtures, reused
    _fresh_server_key_cache,
    _private_storage,
    as_persona,
    ingest,
    replayed,
    trace_key,
)
