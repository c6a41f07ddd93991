"""One context manager for the phases that build or walk a whole module (decode, encode, parse,
print, verify): a module is many small objects and few garbage cycles, so collections triggered
by their allocations would rescan the growing module again and again (a fifth of parsing the
1.4 MB text) and free nearly nothing."""
from __future__ import annotations

import gc


class collection_paused:
    """Automatic garbage collection off inside the block; back as it was after (nesting and a
    caller that turned it off itself are kept). A class rather than a contextlib generator: the
    text commands then never load contextlib (~0.5 ms of a start)."""

    __slots__ = ("_collecting",)

    def __enter__(self) -> None:
        self._collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info) -> None:
        if self._collecting:
            gc.enable()
