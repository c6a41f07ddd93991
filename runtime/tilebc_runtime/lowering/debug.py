"""print and assert with device-side behaviour (vprintf; trap on a failed assert).

print: thread 0 of each tile block prints once; a tile argument prints as "[e0, e1, ...]" with the
argument's conversion repeated per element (the tileiras convention). assert: any thread holding a
false element prints the message and traps. These two are the only divergent branches emitted.
"""
from __future__ import annotations

import re

from tilebc.ir.types import TileType

from . import dtypes
from .common import AFTER_MEMORY, Tile, order_after_token
from .registry import lowers

SPEC = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?(hh|h|ll|l|z|j|t|L)?([diouxXcfFeEgGaAsp])")


def _expand_format(lw, op, text, args):
    """Format string with tile arguments expanded, and [(tile, conversion, length)] per element."""
    pieces, items, cursor, arg_index = [], [], 0, 0
    for match in SPEC.finditer(text):
        pieces.append(text[cursor:match.start()])
        cursor = match.end()
        if match.group(0) == "%%":
            pieces.append("%%")
            continue
        if arg_index >= len(args):
            raise lw.error(op, f"format {text!r} has more conversions than arguments")
        tile = args[arg_index]
        arg_index += 1
        spec = match.group(0)
        conv, length = match.group(2), match.group(1) or ""
        if tile.count == 1:
            pieces.append(spec)
        else:
            pieces.append("[" + ", ".join([spec] * tile.count) + "]")
        items.append((tile, conv, length))
    pieces.append(text[cursor:])
    return "".join(pieces), items


def _value_bytes(conv, length):
    if conv in "fFeEgGaA":
        return 8
    return 8 if length in ("l", "ll", "j", "z", "t") or conv == "p" else 4


def _emit_vprintf(lw, fmt: bytes, values):
    """Call vprintf(fmt, buffer) with `values` [(register, ptx type, size)] packed 8-aligned."""
    w = lw.w
    lw.uses_vprintf = True
    size = 0
    layout = []
    for reg, ptx_type, width in values:
        size = -(-size // width) * width
        layout.append((size, reg, ptx_type))
        size += width
    lw.local_bytes = max(lw.local_bytes, size, 8)
    fmt_address, fmt_generic = w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {fmt_address}, {lw.add_string(fmt)}")
    w(f"cvta.global.u64 {fmt_generic}, {fmt_address}")
    local, generic = w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {local}, __tilebc_printbuf")
    w(f"cvta.local.u64 {generic}, {local}")
    for offset, reg, ptx_type in layout:
        w(f"st.local.{ptx_type} [{local}+{offset}], {reg}")
    w("{\n\t.param .b64 param0;\n\t.param .b64 param1;\n\t.param .b32 retval0")
    w(f"st.param.b64 [param0], {fmt_generic}")
    w(f"st.param.b64 [param1], {generic}")
    w("call (retval0), vprintf, (param0, param1)")
    lw.w.body.append("\t}")
    lw.w.origin.append(lw.w.current_op)


def _as_vararg(lw, reg, element, conv, length):
    """Register converted to what the conversion reads: double, 32- or 64-bit integer."""
    w = lw.w
    name = dtypes.name_of(element)
    if conv in "fFeEgGaA":
        if name == "f64":
            return reg, "f64", 8
        out = w.reg("f64")
        if element.is_float:
            w(f"cvt.f64.f32 {out}, {dtypes.to_f32(w, reg, element)}")
        else:
            wide = lw.scalar_s64(Tile(TileType((), element), [reg]))
            w(f"cvt.rn.f64.s64 {out}, {wide}")
        return out, "f64", 8
    if name == "ptr" or _value_bytes(conv, length) == 8:
        if name in ("ptr", "i64"):
            return reg, "b64", 8
        if element.is_float:
            raise lw.error(w.current_op, f"%{conv} given a {name} argument")
        return lw.scalar_s64(Tile(TileType((), element), [reg])), "b64", 8
    if name == "i64":
        out = w.reg("b32")
        w(f"cvt.u32.u64 {out}, {reg}")
        return out, "b32", 4
    if name == "i1":
        out = w.reg("b32")
        w(f"selp.b32 {out}, 1, 0, {reg}")
        return out, "b32", 4
    if element.is_float:
        raise lw.error(w.current_op, f"%{conv} given a {name} argument")
    return reg, "b32", 4


@lowers("print_tko")
def lower_print(lw, op):
    w = lw.w
    order_after_token(lw, op)
    args = [lw.get(v) for v in op.operands["args"]]
    text, items = _expand_format(lw, op, op.attrs["str"], args)
    # Tiles are gathered to shared memory so thread 0 can read every element.
    offsets = lw.reserve_smem([lw.smem_size_of(t.type) if t.count > 1 else 0 for t, _, _ in items])
    for (tile, _, _), offset in zip(items, offsets):
        if tile.count > 1:
            lw.smem_write(tile, offset)
    lw.barrier()
    skip, first = w.label("noprint"), w.reg("pred")
    w(f"setp.ne.u32 {first}, {lw.tid()}, 0")
    w(f"@{first} bra {skip}")
    values = []
    for (tile, conv, length), offset in zip(items, offsets):
        if tile.count == 1:
            values.append(_as_vararg(lw, tile.scalar, tile.element, conv, length))
            continue
        for e in range(tile.count):
            reg = lw.smem_read(offset, lw.const_u32(e), tile.element)
            values.append(_as_vararg(lw, reg, tile.element, conv, length))
    _emit_vprintf(lw, text.encode("utf-8", "surrogateescape"), values)
    w.place(skip)
    lw.barrier()
    for result in op.results:
        lw.set(result, AFTER_MEMORY)


@lowers("assert")
def lower_assert(lw, op):
    w = lw.w
    condition: Tile = lw.get(op.operands["condition"])
    failed = None
    for k in range(lw.slots(condition.count)):
        bad = w.reg("pred")
        w(f"not.pred {bad}, {condition.slot(k)}")
        failed = bad if failed is None else _or(w, failed, bad)
    ok = w.label("assert_ok")
    passed = w.reg("pred")
    w(f"not.pred {passed}, {failed}")
    w(f"@{passed} bra {ok}")
    message = f"tile assertion failed: {op.attrs['message']}\n".replace("%", "%%")
    _emit_vprintf(lw, message.encode("utf-8", "surrogateescape"), [])
    w("trap")
    w.place(ok)


def _or(w, a, b):
    out = w.reg("pred")
    w(f"or.pred {out}, {a}, {b}")
    return out
