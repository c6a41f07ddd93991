"""The binary layer: container schemas (construct), the table-driven op codec, load and dump."""
from .limits import DecodeLimits  # noqa: F401


def __getattr__(name):
    # The reader and writer load on first use: `tilebc compile` served from the cubin cache reads
    # only the container (binary.container), and decoding, printing and verifying never encode.
    if name == "load":
        from .reader import load
        return load
    if name == "DecodeWarning":
        from .lenient import DecodeWarning
        return DecodeWarning
    if name == "dump":
        from .writer import dump
        return dump
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
