"""tilebc: an open toolchain for CUDA Tile IR bytecode (versions 13.1–13.5)."""
from .api import load  # noqa: F401
from .binary import DecodeLimits  # noqa: F401
from .errors import (DecodeError, EncodeError, TextSyntaxError, TilebcError,  # noqa: F401
                     VerificationError, VersionError)
from .ir import Module  # noqa: F401
from .version import ALL_VERSIONS, MAX_VERSION, MIN_VERSION, Version  # noqa: F401

__version__ = "0.1.0"


def __getattr__(name):
    # Text form and interpreter load on first use, so `import tilebc` stays light.
    if name in ("parse_module", "print_module", "assemble"):
        from . import text
        return getattr(text, name)
    if name == "dump":  # the writer: `dis`, `verify` and `info` never encode
        from .binary import dump
        return dump
    if name == "run":
        from .interp import run
        return run
    raise AttributeError(f"module 'tilebc' has no attribute {name!r}")
