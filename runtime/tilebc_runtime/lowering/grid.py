"""Tile-block coordinates: a tile block is one CTA, so block ids and grid size are %ctaid / %nctaid."""
from __future__ import annotations

from .common import Tile
from .registry import lowers


def _special(lw, op, register):
    for axis, result in zip("xyz", op.results):
        def make(axis=axis):
            reg = lw.w.reg("b32")
            lw.w(f"mov.u32 {reg}, {register}.{axis}")
            return reg
        lw.set(result, Tile(result.type, [lw._cached((register, axis), make)]))


@lowers("get_tile_block_id")
def lower_block_id(lw, op):
    _special(lw, op, "%ctaid")


@lowers("get_num_tile_blocks")
def lower_num_blocks(lw, op):
    _special(lw, op, "%nctaid")
