"""A transparency-log witness (c2sp.org/tlog-witness) with Ed25519 cosignatures
(c2sp.org/tlog-cosignature, cosignature/v1).

It ships with the Replay Audit Console but imports nothing of it (only the pure ``tlog``
package), so it can run on another machine, by someone other than the console's operator:

    python -m witness keygen --name witness.example/w1 --out witness.key
    python -m witness serve --key witness.key --state var/witness \\
        --log '<log vkey>' [--log ...] --port 8207

It keeps, per log (origin), the latest checkpoint it verified and cosigned, and cosigns a new
checkpoint only when it comes with a consistency proof from that one (``POST /add-checkpoint``).
``GET /<sha256(origin) hex>/checkpoint`` serves the latest cosigned checkpoint.
"""
