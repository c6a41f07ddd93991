"""The binary layer: container schemas (construct), the table-driven op codec, load and dump."""
from .lenient import DecodeWarning  # noqa: F401
from .limits import DecodeLimits  # noqa: F401
from .reader import load  # noqa: F401
from .writer import dump  # noqa: F401
