"""Text form of Tile IR: the printer (tileirdisasm-compatible) and the parser/assembler."""
from .printer import print_module  # noqa: F401
