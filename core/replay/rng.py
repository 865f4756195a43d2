"""The deterministic RNG every replayable run draws from.

Construction (version 1, never changed silently; a new construction gets a new version):

    block(i) = SHA-256( b"replay-rng/v1\\x00" + utf8(seed) + b"\\x00" + utf8(stream)
                        + b"\\x00" + i as 8 bytes big-endian )

for i = 0, 1, 2, ...; each 32-byte block yields four 64-bit unsigned integers, read
big-endian in order. `stream` is "" for the root generator; `fork(name)` returns a generator
whose stream is `parent_stream + "/" + name`, so independent consumers (the brainstate
replay, each step) draw from independent streams and a replay can resume at any step
without replaying the draws of the steps before it.

- `next_u64()` is the next 64-bit integer;
- `random()` is `(next_u64() >> 11) * 2**-53`, a float in [0, 1) with 53 random bits;
- `randbelow(n)` rejects draws >= the largest multiple of n below 2**64 (no modulo bias);
- `randint(a, b)`, `choice(seq)` and `shuffle(list)` (Fisher-Yates from the end) build
  on `randbelow`.

Pure: no clock, no OS entropy, no global state.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableSequence, Sequence
from typing import TypeVar

T = TypeVar("T")

_DOMAIN = b"replay-rng/v1\x00"
_TWO64 = 1 << 64


class DeterministicRNG:
    """A reproducible random stream derived from a job seed (see the module docstring)."""

    __slots__ = ("_buffer", "_counter", "_prefix", "seed", "stream")

    def __init__(self, seed: str, stream: str = "") -> None:
        if not isinstance(seed, str):
            raise TypeError("the seed is a string (the trace's job_seed)")
        self.seed = seed
        self.stream = stream
        self._prefix = _DOMAIN + seed.encode() + b"\x00" + stream.encode() + b"\x00"
        self._counter = 0
        self._buffer: list[int] = []

    def fork(self, name: str) -> DeterministicRNG:
        """An independent generator for the named sub-stream."""
        return DeterministicRNG(self.seed, f"{self.stream}/{name}")

    def next_u64(self) -> int:
        """The next 64-bit unsigned integer of the stream."""
        if not self._buffer:
            block = hashlib.sha256(self._prefix + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
            self._buffer = [int.from_bytes(block[i : i + 8], "big") for i in (24, 16, 8, 0)]
        return self._buffer.pop()

    def random(self) -> float:
        """A float in [0, 1) with 53 random bits."""
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def randbelow(self, n: int) -> int:
        """An integer in [0, n) without modulo bias."""
        if n <= 0:
            raise ValueError("randbelow needs n > 0")
        limit = _TWO64 - (_TWO64 % n)
        while True:
            draw = self.next_u64()
            if draw < limit:
                return draw % n

    def randint(self, a: int, b: int) -> int:
        """An integer in [a, b], both ends included."""
        if b < a:
            raise ValueError("randint needs a <= b")
        return a + self.randbelow(b - a + 1)

    def choice(self, seq: Sequence[T]) -> T:
        """One element of a non-empty sequence."""
        if not seq:
            raise IndexError("cannot choose from an empty sequence")
        return seq[self.randbelow(len(seq))]

    def shuffle(self, items: MutableSequence[T]) -> None:
        """Shuffle in place (Fisher-Yates, from the last index down)."""
        for i in range(len(items) - 1, 0, -1):
            j = self.randbelow(i + 1)
            items[i], items[j] = items[j], items[i]
