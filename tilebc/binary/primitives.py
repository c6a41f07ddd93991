"""Byte-level reading and writing: varints, zigzag, fixed-width integers, arrays, alignment.

The reader checks every length against the bytes that remain before it allocates or loops, so
hostile input fails with a DecodeError that carries the absolute file offset.
"""
from __future__ import annotations

import struct

from ..errors import DecodeError

PADDING_BYTE = 0xCB
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def zigzag_encode(value: int) -> int:
    return (value << 1) ^ (value >> 63) if value >= 0 else ((-value) << 1) - 1


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


class Reader:
    """A cursor over `data[start:end]` whose offsets are absolute file offsets (`base` + position)."""

    __slots__ = ("data", "pos", "end", "base", "file")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None, *, base: int = 0,
                 file: str | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.base = base
        self.file = file

    @property
    def offset(self) -> int:
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def error(self, message: str, offset: int | None = None) -> DecodeError:
        return DecodeError(message, file=self.file, offset=self.offset if offset is None else offset)

    def at_end(self) -> bool:
        return self.pos >= self.end

    def sub(self, length: int, what: str) -> Reader:
        """A reader over the next `length` bytes; advances past them."""
        self.need(length, what)
        start = self.pos
        self.pos += length
        return Reader(self.data, start, start + length, base=self.base, file=self.file)

    def need(self, count: int, what: str) -> None:
        if count < 0 or count > self.end - self.pos:
            raise self.error(f"truncated input: {what} needs {count} bytes, "
                             f"{max(self.end - self.pos, 0)} remain")

    def varint(self, what: str = "varint") -> int:
        data, pos, end = self.data, self.pos, self.end
        if pos < end:
            byte = data[pos]
            if byte < 0x80:
                self.pos = pos + 1
                return byte
        result = 0
        shift = 0
        start = pos
        while True:
            if pos >= end:
                raise self.error(f"truncated input: unterminated {what}", self.base + start)
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                raise self.error(f"{what} is longer than 10 bytes", self.base + start)
        if result >> 64:
            raise self.error(f"{what} does not fit in 64 bits", self.base + start)
        self.pos = pos
        return result

    def count(self, what: str, min_bytes_each: int = 1) -> int:
        """A varint element count, checked against the bytes that remain."""
        pos = self.pos
        if pos < self.end:  # a one-byte count that fits: the common case, without the calls
            value = self.data[pos]
            if value < 0x80 and value * min_bytes_each < self.end - pos:
                self.pos = pos + 1
                return value
        start = self.offset
        value = self.varint(what)
        if value * min_bytes_each > self.end - self.pos:
            raise self.error(f"{what} {value} exceeds the {self.end - self.pos} bytes that remain",
                             start)
        return value

    def zigzag(self, what: str = "signed varint") -> int:
        value = zigzag_decode(self.varint(what))
        return value

    def u8(self, what: str = "byte") -> int:
        if self.pos >= self.end:
            raise self.error(f"truncated input: expected {what}")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def fixed(self, size: int, what: str, signed: bool = False) -> int:
        self.need(size, what)
        value = int.from_bytes(self.data[self.pos:self.pos + size], "little", signed=signed)
        self.pos += size
        return value

    def raw(self, size: int, what: str) -> bytes:
        self.need(size, what)
        value = bytes(self.data[self.pos:self.pos + size])
        self.pos += size
        return value

    def int_array(self, width: int, what: str) -> list[int]:
        """varint count + `width`-byte little-endian signed integers."""
        count = self.count(f"{what} length", width)
        start = self.pos
        self.pos += count * width
        fmt = {4: "i", 8: "q", 1: "B"}[width]
        return list(struct.unpack_from(f"<{count}{fmt}", self.data, start))

    def align(self, alignment: int, what: str, on_bad=None) -> None:
        """Skip padding up to a multiple of `alignment` (relative to `base`), checking it is 0xCB.

        A byte other than 0xCB is an error, or, given `on_bad`, reported as on_bad(message, offset).
        """
        pad = (-self.offset) % alignment
        self.need(pad, f"padding before {what}")
        for index in range(pad):
            if self.data[self.pos + index] != PADDING_BYTE:
                message = (f"padding byte before {what} is 0x{self.data[self.pos + index]:02x}, "
                           f"expected 0x{PADDING_BYTE:02X}")
                if on_bad is None:
                    raise self.error(message, self.offset + index)
                on_bad(message, self.offset + index)
                break
        self.pos += pad


class Writer:
    """An append-only byte buffer with the format's primitive encoders."""

    __slots__ = ("buf",)

    def __init__(self):
        self.buf = bytearray()

    def varint(self, value: int) -> None:
        if value < 0x80 and value >= 0:  # one byte (most values); `value < …` first as below
            self.buf.append(value)
            return
        if value < 0:
            raise ValueError(f"varint cannot encode negative value {value}")
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def zigzag(self, value: int) -> None:
        self.varint(zigzag_encode(value))

    def u8(self, value: int) -> None:
        self.buf.append(value)

    def fixed(self, value: int, size: int, signed: bool = False) -> None:
        self.buf += value.to_bytes(size, "little", signed=signed)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def int_array(self, values, width: int) -> None:
        self.varint(len(values))
        fmt = {4: "i", 8: "q", 1: "B"}[width]
        self.buf += struct.pack(f"<{len(values)}{fmt}", *values)

    def align(self, alignment: int, base: int = 0) -> None:
        pad = (-(base + len(self.buf))) % alignment
        self.buf += bytes([PADDING_BYTE]) * pad


def encode_varint(value: int) -> bytes:
    writer = Writer()
    writer.varint(value)
    return bytes(writer.buf)
