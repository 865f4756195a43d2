"""The one compiled module, ``core.formats.contextos._compiled`` (its source's header says
why); everything else about the package is in pyproject.toml."""

import sysconfig
from pathlib import Path

from setuptools import Extension, setup


def _sha256() -> dict:
    """OpenSSL's SHA-256 (EVP) where its header is installed (Debian: libssl-dev, which
    building CPython's own hashlib needs too); else the module hashes through hashlib."""
    for include in ("/usr/include", "/usr/local/include", sysconfig.get_config_var("INCLUDEDIR")):
        if include and (Path(include) / "openssl" / "sha.h").is_file():
            return {"define_macros": [("HAVE_OPENSSL_SHA", "1")], "libraries": ["crypto"]}
    return {}


setup(
    ext_modules=[
        Extension(
            "core.formats.contextos._compiled",
            sources=["core/formats/contextos/_compiled.c"],
            extra_compile_args=["-Wall", "-Wextra", "-Wno-unused-parameter"],
            **_sha256(),
        )
    ]
)
