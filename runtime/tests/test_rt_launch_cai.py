"""CUDA Array Interface arrays whose typestr cannot name the kernel's element type (bf16, fp8),
and cuda.core Buffers / StridedMemoryViews, up to the driver call."""
import numpy as np
import pytest

from tilebc_runtime.args import ArgumentError

from test_rt_launch import BASE, FakeCAI, FakeDLPack, only_kernel, prepare

MIB = 1 << 20


class FakeTorchDtype:
    """What torch exposes as `.dtype`: not a numpy dtype; its str is 'torch.<name>'."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class CAIWithDtype(FakeCAI):
    def __init__(self, *args, dtype=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.dtype = dtype


def bf16_kernel():
    kernel = only_kernel("elementwise_bf16")
    assert [str(p.element) for p in kernel.signature.params] == ["bf16"] * 3
    return kernel


@pytest.mark.parametrize("typestr", ["<V2", "<u2", "<i2"])
def test_bf16_arrays_pass_as_raw_two_byte_typestrs(typestr):
    kernel = bf16_kernel()
    arrays = [FakeCAI(BASE + i * MIB, (64,), typestr=typestr, strides=(4,)) for i in range(3)]
    packed = prepare(kernel, *arrays)
    # strides come back in elements of the kernel's 2-byte type
    assert [int(v) for v in packed.values[:3]] == [BASE, 64, 2]
    assert packed.keep_alive == arrays


def test_fp8_arrays_pass_as_raw_one_byte_typestrs():
    from tilebc_runtime import launch
    from test_rt_launch import fixture
    module = launch.load(fixture("cast_fp8"))
    kernel = next(module[name] for name, signature in module.entries.items()
                  if any(str(p.element).startswith("f8") for p in signature.params))
    params = kernel.signature.params
    args = []
    for i, param in enumerate(params):
        name = str(param.element)
        typestr = "|u1" if name.startswith("f8") else {"f32": "<f4", "f16": "<f2"}.get(name)
        if typestr is None:
            pytest.skip(f"cast_fp8 has a {name} parameter this test does not build")
        args.append(FakeCAI(BASE + i * MIB, (64,), typestr=typestr))
    assert any(str(p.element).startswith("f8") for p in params)
    packed = prepare(kernel, *args)
    assert int(packed.values[0]) == BASE


def test_raw_typestr_of_the_wrong_size_is_refused_with_what_is_accepted():
    kernel = bf16_kernel()
    good = [FakeCAI(BASE + i * MIB, (64,), typestr="<u2") for i in (1, 2)]
    with pytest.raises(ArgumentError) as caught:
        prepare(kernel, FakeCAI(BASE, (64,), typestr="<u4"), *good)
    text = str(caught.value)
    assert "array dtype uint32 does not match the kernel's bf16" in text
    assert "'<V2', '<u2' or '<i2'" in text and ".dtype is bfloat16" in text and "DLPack" in text
    with pytest.raises(ArgumentError, match="array dtype float16 does not match the kernel's bf16"):
        prepare(kernel, FakeCAI(BASE, (64,), typestr="<f2"), *good)


def test_raw_typestr_does_not_stand_for_types_a_typestr_can_name():
    kernel = only_kernel("aliasing_arrays")  # f32 arrays: '<f4' names them, '<V4' is refused
    with pytest.raises(ArgumentError, match="array dtype void32 does not match the kernel's f32"):
        prepare(kernel, FakeCAI(BASE, (64,), typestr="<V4"), FakeCAI(BASE + MIB, (64,)))


@pytest.mark.parametrize("declared", ["bfloat16", FakeTorchDtype("bfloat16")])
def test_declared_dtype_interprets_a_raw_typestr(declared):
    import ml_dtypes
    kernel = bf16_kernel()
    if declared == "bfloat16":
        declared = np.dtype(ml_dtypes.bfloat16)
    arrays = [CAIWithDtype(BASE + i * MIB, (8,), typestr="<u2", dtype=declared) for i in range(3)]
    prepare(kernel, *arrays)


def test_declared_dtype_wins_over_the_kernel_type():
    """An object that says it holds uint16 is not silently read as bf16."""
    kernel = bf16_kernel()
    good = [FakeCAI(BASE + i * MIB, (8,), typestr="<u2") for i in (1, 2)]
    with pytest.raises(ArgumentError, match="array dtype uint16 does not match the kernel's bf16"):
        prepare(kernel, CAIWithDtype(BASE, (8,), typestr="<u2", dtype=FakeTorchDtype("uint16")),
                *good)


def test_cuda_core_buffer_is_refused_and_a_strided_view_accepted():
    from cuda.core import Buffer
    from cuda.core.utils import StridedMemoryView
    import ml_dtypes
    kernel = bf16_kernel()
    buffer = Buffer.from_handle(BASE, 1024)
    good = [FakeDLPack(BASE + i * MIB, (8,), "int16") for i in (1, 2)]
    with pytest.raises(ArgumentError, match="a cuda.core Buffer is untyped bytes; .*"
                       "StridedMemoryView.from_buffer"):
        prepare(kernel, buffer, *good)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    try:
        views = [StridedMemoryView.from_buffer(Buffer.from_handle(BASE + i * MIB, 1024), (64,),
                                               dtype=bf16) for i in range(3)]
    except Exception:  # cuda.core needs the driver library to build a view: mimic its attributes
        views = [FakeStridedMemoryView(BASE + i * MIB, (64,), None, bf16) for i in range(3)]
    packed = prepare(kernel, *views)
    assert [int(v) for v in packed.values[:3]] == [BASE, 64, 1]
    assert packed.keep_alive == views
    host = FakeStridedMemoryView(BASE, (64,), None, bf16, device_accessible=False)
    with pytest.raises(ArgumentError, match="the StridedMemoryView is host memory"):
        prepare(kernel, host, *views[1:])


class FakeStridedMemoryView:
    """The attributes of cuda.core.utils.StridedMemoryView the launcher reads."""

    def __init__(self, ptr, shape, strides, dtype, device_accessible=True):
        self.ptr, self.shape, self.strides, self.dtype = ptr, shape, strides, dtype
        self.device_id, self.readonly, self.is_device_accessible = 0, False, device_accessible


FakeStridedMemoryView.__name__ = "StridedMemoryView"
FakeStridedMemoryView.__module__ = "cuda.core._memoryview"
