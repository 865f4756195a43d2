from __future__ import annotations

import pytest

from governance import ledger


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    # server keys are cached per process; each test database starts without keys
    ledger._private_keys.clear()
    ledger._keys_by_id.clear()
    yield
    ledger._private_keys.clear()
    ledger._keys_by_id.clear()
