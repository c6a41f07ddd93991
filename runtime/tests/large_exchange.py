"""A kernel whose JIT code stages 64 KiB in shared memory, over the 48 KiB a CTA gets without
opting in: one 64x256 i32 tile transposed (the permute's exchange holds the whole tile). The tests
of the dynamic-shared-memory path (extern array, launch bytes, kernel attribute, cache metadata,
C++ loader) use it; the fixtures' kernels all fit statically since reductions stopped staging
whole tiles."""
import atexit
import shutil
import tempfile
from pathlib import Path

ROWS, COLUMNS = 64, 256
# the permute stages the source with a 4-byte pad after each row, so that reading it down its
# columns hits 32 banks (lowering/staging.py)
EXCHANGE_BYTES = ROWS * (COLUMNS + 1) * 4


def transpose_bytecode() -> bytes:
    """`transpose(src: ptr<i32>, dst: ptr<i32>)`: dst (COLUMNS x ROWS) = src (ROWS x COLUMNS)ᵀ."""
    import tilebc
    from tilebc.ir.builder import module_entry, new_module
    from tilebc.ir.types import PointerType, i32, scalar

    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "transpose", [scalar(PointerType(i32)), scalar(PointerType(i32))])
    src, dst = b.args
    token = b.make_token()
    source = b.partition_view(b.tensor_view(src, shape=[ROWS, COLUMNS], strides=[COLUMNS, 1]),
                              (ROWS, COLUMNS))
    target = b.partition_view(b.tensor_view(dst, shape=[COLUMNS, ROWS], strides=[ROWS, 1]),
                              (COLUMNS, ROWS))
    zero = b.constant(0, "i32")
    tile, _ = b.load(source, [zero, zero], token=token)
    b.store(b.permute(tile, [1, 0]), target, [zero, zero], token=token)
    b.return_()
    return tilebc.dump(module)


def _write() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tilebc-large-exchange-"))
    atexit.register(shutil.rmtree, folder, True)
    path = folder / "transpose_64x256_i32.tilebc"
    path.write_bytes(transpose_bytecode())
    return path


TRANSPOSE = _write()
