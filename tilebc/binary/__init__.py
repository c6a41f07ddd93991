"""The binary layer: container schemas (construct), the table-driven op codec, load and dump."""
from .lenient import DecodeWarning  # noqa: F401
from .limits import DecodeLimits  # noqa: F401
from .reader import load  # noqa: F401


def __getattr__(name):
    # The writer loads on first use: decoding, printing and verifying never encode.
    if name == "dump":
        from .writer import dump
        return dump
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
