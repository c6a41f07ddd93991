"""The printer against NVIDIA's tileirdisasm: stored disassembly of every fixture, and live runs of
the disassembler on hand-built modules for ops and values cuTile never emits."""
import contextlib
import struct

import pytest

import tilebc
from tilebc.ir import (BoundedAttr, DenseElementsAttr, DictionaryAttr, DivByAttr, IntegerAttr,
                       Module, OptimizationHintsAttr, PartitionViewType, PointerType, TensorViewType,
                       bf16, f16, f32, f64, i1, i32, scalar, tile, token)
from tilebc.ir.builder import new_function
from tilebc.ops import (AtomicRMWMode, ComparisonPredicate, MemoryOrderingSemantics, MemoryScope,
                        MultimemReductionKind, PtrAttr)
from tilebc.oracles import tileirdisasm
from tilebc.text import print_module
from tilebc.text import printer as printer_module
from tilebc.text.floats import format_float

from conftest import CaseFailures, decoded, fixture_kernels, needs_disasm
from handbuilt import KERNELS, i32_constant

FIXTURE_KERNELS = fixture_kernels()


# The "compiled" tests' printers, compiled once per kind per process as outside the tests (a
# compile per kind per test cost more than the printing).
_COMPILED_PRINTERS = {}


@contextlib.contextmanager
def op_printers(kind):
    """Every op printed by walking its syntax elements ("walked"), or every op by its kind's
    compiled printer ("compiled"; by default the first few ops of a kind are walked, the rest
    compiled)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(printer_module, "_OP_PRINTERS",
                      _COMPILED_PRINTERS if kind == "compiled" else {})
        patch.setattr(printer_module, "_USES", {})  # kind -> ops walked
        patch.setattr(printer_module, "COMPILE_AFTER", 0 if kind == "compiled" else 1 << 60)
        yield


PRINTERS = ("walked", "compiled")


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_fixture_matches_tileirdisasm(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        for kind in PRINTERS:
            with failures.case(f"{path.name} ({kind})"), op_printers(kind):
                module = decoded(path)
                assert print_module(module) == path.with_suffix(".dis").read_text()
                # walked: no printer compiled; compiled: no op walked
                assert bool(printer_module._OP_PRINTERS) == (kind == "compiled") \
                    == (not printer_module._USES)
    failures.raise_any()


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_fixture_debug_matches_tileirdisasm_g(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        for kind in PRINTERS:
            with failures.case(f"{path.name} ({kind})"), op_printers(kind):
                module = decoded(path)
                assert print_module(module, debug=True) == path.with_suffix(".dis-g").read_text()
    failures.raise_any()


def _constants_and_names():
    """Float formatting (6-digit, natural-precision and hex forms), non-splat and i1 constants,
    and `assume_…` names derived from the producer."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "names", [scalar(i32), scalar(PointerType(f32))])
    x, pointer = b.block.args
    bounded = BoundedAttr(0, None)
    five = i32_constant(b, 5)
    b.op("assume", [five], [scalar(i32)], {"predicate": bounded})
    block_id = b.op("get_tile_block_id", [], [scalar(i32)] * 3)
    b.op("assume", [block_id[1]], [scalar(i32)], {"predicate": bounded})
    total = b.op("addi", [x, x], [scalar(i32)])
    b.op("assume", [total], [scalar(i32)], {"predicate": bounded})
    cond = b.op("cmpi", [x, x], [scalar(i1)], {"comparison_predicate": ComparisonPredicate.EQUAL})
    then, then_b = b.region([])
    then_b.op("yield", [[x]])
    other, other_b = b.region([])
    other_b.op("yield", [[five]])
    chosen = b.op("if", [cond], [scalar(i32)], regions=[then, other])
    b.op("assume", [chosen], [scalar(i32)], {"predicate": bounded})
    shaped = b.op("reshape", [pointer], [tile((1,), PointerType(f32))])
    b.op("assume", [shaped], [tile((1,), PointerType(f32))], {"predicate": DivByAttr(16, 1, 0)})
    data = b"".join(v.to_bytes(4, "little", signed=True) for v in range(-3, 5))
    b.op("constant", [], [tile((2, 4), i32)], {"value": DenseElementsAttr(tile((2, 4), i32), data)})
    for value in (3.14159274, 0.1, 1e-8, 16777216.0, -0.0, float("inf"), float("nan"), 2.5e-45):
        b.op("constant", [], [scalar(f32)],
             {"value": DenseElementsAttr(scalar(f32), struct.pack("<f", value))})
    for value in (3.14159274, 1e16, 123456789012.0):
        b.op("constant", [], [scalar(f64)],
             {"value": DenseElementsAttr(scalar(f64), struct.pack("<d", value))})
    for bits in (0x3555, 0x0001, 0x7BFF):
        b.op("constant", [], [scalar(f16)], {"value": DenseElementsAttr(scalar(f16), struct.pack("<H", bits))})
    b.op("constant", [], [scalar(bf16)], {"value": DenseElementsAttr(scalar(bf16), b"\x81\x3f")})
    b.op("constant", [], [tile((16,), i1)], {"value": DenseElementsAttr(tile((16,), i1), b"\x05\x02")})
    b.op("return", [[]])
    return module


def _view_variants():
    """Scopes, inbounds, hints and non-default reductions on view ops (13.5)."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "views", [scalar(PointerType(f16, PtrAttr.MULTICAST)),
                                       scalar(PointerType(f16))])
    multicast, plain = b.block.args
    mc_type = TensorViewType(f16, (64,), (1,), PtrAttr.MULTICAST)
    mc_view = b.op("make_tensor_view", [multicast, [], []], [mc_type])
    mc_parts = b.op("make_partition_view", [mc_view], [PartitionViewType((16,), mc_type, (0,))])
    zero = i32_constant(b, 0)
    loaded, ready = b.op("multimem_load_reduce_view_tko", [mc_parts, [zero], None],
                         [tile((16,), f16), token],
                         {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
                          "memory_scope": MemoryScope.SYS, "reduction": MultimemReductionKind.MAX,
                          "inbounds": (True,)})
    reduced = b.op("multimem_reduce_view_tko", [mc_parts, loaded, [zero], None], [token],
                   {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
                    "memory_scope": MemoryScope.DEVICE, "inbounds": (True,),
                    "reduction": MultimemReductionKind.ADD})
    b.op("multimem_store_view_tko", [mc_parts, loaded, [zero], reduced], [token],
         {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
          "memory_scope": MemoryScope.SYS})
    view_type = TensorViewType(f16, (64,), (1,))
    view = b.op("make_tensor_view", [plain, [], []], [view_type])
    parts = b.op("make_partition_view", [view], [PartitionViewType((16,), view_type, (0,))])
    latency = OptimizationHintsAttr((("sm_100", DictionaryAttr((("latency", IntegerAttr(i32, 3)),))),))
    value, _ = b.op("load_view_tko", [parts, [zero], reduced], [tile((16,), f16), token],
                    {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK,
                     "inbounds": (True,), "optimization_hints": latency})
    b.op("store_view_tko", [value, parts, [zero], None], [token],
         {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK, "optimization_hints": latency})
    b.op("atomic_red_view_tko", [parts, [zero], value, None], [token],
         {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
          "memory_scope": MemoryScope.DEVICE, "mode": AtomicRMWMode.ADDF, "inbounds": (True,)})
    b.op("return", [[]])
    return module


# Full buffers whose elements are all equal: MLIR turns them into splats, so tileirdisasm prints
# (and names) one value. Bitwise equality: -0.0/0.0 and different NaN payloads stay lists.
EQUAL_ELEMENTS = [
    (tile((4,), f32), struct.pack("<4f", 1, 1, 1, 1), "%cst_1_f32 = constant <f32: 1.000000e+00> : tile<4xf32>"),
    (tile((2, 2), i32), struct.pack("<4i", 7, 7, 7, 7), "%cst_7_i32 = constant <i32: 7> : tile<2x2xi32>"),
    (tile((16,), i1), b"\xff\xff", "%true = constant <i1: true> : tile<16xi1>"),
    (tile((4,), i1), b"\x0f", "%true = constant <i1: true> : tile<4xi1>"),
    (tile((16,), i1), b"\x00\x00", "%false = constant <i1: false> : tile<16xi1>"),
    (tile((2,), f16), b"\x00\x80\x00\x00",
     "%cst_f16 = constant <f16: [-0.000000e+00, 0.000000e+00]> : tile<2xf16>"),
    (tile((2,), f32), b"\x00\x00\xc0\x7f\x01\x00\xc0\x7f",
     "%cst_f32 = constant <f32: [0x7FC00000, 0x7FC00001]> : tile<2xf32>"),
]


def _equal_elements():
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "equal", [])
    for type_, raw, _ in EQUAL_ELEMENTS:
        b.op("constant", [], [type_], {"value": DenseElementsAttr(type_, raw)})
    b.op("return", [[]])
    return module


def test_equal_elements_print_as_a_splat():
    listing = print_module(tilebc.load(tilebc.dump(_equal_elements())))
    lines = [line.strip() for line in listing.splitlines() if "constant" in line]
    expected = [text for _, _, text in EQUAL_ELEMENTS]
    # later constants with the same name get tileirdisasm's _N suffix
    assert [line.split(" = ")[1] for line in lines] == [t.split(" = ")[1] for t in expected]
    assert lines[:2] == expected[:2]


HANDBUILT = {**{name: (lambda f=f: f()[0]) for name, f in KERNELS.items()},
             "constants_and_names": _constants_and_names, "view_variants": _view_variants,
             "equal_elements": _equal_elements}


@needs_disasm
@pytest.mark.parametrize("name", sorted(HANDBUILT))
def test_handbuilt_matches_live_tileirdisasm(name):
    module = HANDBUILT[name]()
    data = tilebc.dump(module, module.version)
    expected = tileirdisasm(data)
    assert expected.ok, expected.stderr
    assert print_module(tilebc.load(data)) == expected.stdout


@pytest.mark.parametrize("bits, element, text", [
    (0x3FC00000, f32, "1.500000e+00"),      # six significant digits, padded
    (0x40490FDB, f32, "3.14159274"),        # not exact in six digits: natural precision
    (0x4B800000, f32, "0x4B800000"),        # natural form has no '.': raw bits
    (0x7FC00000, f32, "0x7FC00000"),
    (0x80000000, f32, "-0.000000e+00"),
    (0x3F81, bf16, "1.007810e+00"),         # rounded to six digits, seventh is padding
])
def test_float_literals(bits, element, text):
    assert format_float(bits, element) == text


def test_compiled_printers_print_ops_not_shaped_as_declared_as_the_walker_does():
    """A compiled printer reads operand groups as the spec declares them; an op built otherwise
    (a single operand given as a tuple, a variadic group given as a single value, an operand
    missing from the dict) is printed by the kind's generic body, as the syntax walker prints
    it."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "shapes", [scalar(f32), scalar(f32)])
    x, y = b.block.args
    b.op("reshape", [x], [tile((1,), f32)])
    b.op("addf", [x, y], [scalar(f32)])
    b.op("return", [[]])
    shaped = {}
    for kind in PRINTERS:
        with op_printers(kind):
            shaped[kind] = print_module(module)
    assert shaped["walked"] == shaped["compiled"]
    ops = module.functions[0].body.ops
    ops[0].operands["source"] = (x,)         # ONE as a one-element tuple
    ops[1].operands["rhs"] = (y,)
    texts = {}
    for kind in PRINTERS:
        with op_printers(kind):
            texts[kind] = print_module(module)
    assert texts["walked"] == texts["compiled"] == shaped["walked"]
    ops[2].operands["operands"] = y          # VARIADIC as one value
    for kind in PRINTERS:
        with op_printers(kind):
            texts[kind] = print_module(module)
    assert texts["walked"] == texts["compiled"] != shaped["walked"]
    assert "return %arg1 : tile<f32>" in texts["compiled"]
    del ops[0].operands["source"]            # missing: printed as absent
    for kind in PRINTERS:
        with op_printers(kind):
            texts[kind] = print_module(module)
    assert texts["walked"] == texts["compiled"] != shaped["walked"]


def test_unverified_ir_the_namer_cannot_name_is_refused_with_a_message():
    """print_module of IR the verifier refuses: a constant without its dense value is refused
    with a TilebcError naming the op, an `assume` of a one-value tuple printed as its walker
    prints it, neither a traceback from naming their results."""
    import glob
    import os
    import pytest
    import tilebc
    from tilebc.text import print_module
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    paths = sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc")))
    for kind in ("constant", "assume"):
        module = next(m for m in map(lambda p: tilebc.load(p, verify=False), paths)
                      if any(op.name == kind for f in m.functions for op in f.walk()))
        op = next(op for f in module.functions for op in f.walk() if op.name == kind)
        if kind == "constant":
            op.attrs = {name: value for name, value in op.attrs.items() if name != "value"}
        else:
            op.operands["value"] = (op.operands["value"],)
        if kind == "constant":
            with pytest.raises(tilebc.TilebcError, match="cannot print constant"):
                print_module(module)
        else:
            assert "= assume " in print_module(module)


def test_entries_sharing_a_signature_print_their_own_parameters():
    """Entries of one signature share the text of their parameters, unless an entry's block
    arguments are not the signature's (hand-built IR): its own types, and a parameter listed
    twice, print as they are."""
    from tilebc.ir.types import f32, i32, scalar
    module = tilebc.Module()
    for name in ("first", "second", "third"):
        builder = new_function(module, name, [scalar(i32), scalar(i32)])
        builder.op("return", [[]])
    module.functions[1].type = module.functions[2].type = module.functions[0].type
    module.functions[1].body.args[1].type = scalar(f32)
    third = module.functions[2].body.args
    third[1] = third[0]
    lines = [line for line in print_module(module).splitlines() if line.startswith("entry")]
    assert lines[0].startswith("entry @first(%arg0: tile<i32>, %arg1: tile<i32>)")
    assert lines[1].startswith("entry @second(%arg0: tile<i32>, %arg1: tile<f32>)")
    assert lines[2].startswith("entry @third(%arg1: tile<i32>, %arg1: tile<i32>)")


def test_a_large_module_compiles_each_kinds_printer_at_its_first_op(monkeypatch):
    """A module of codecache.COMPILE_AT_ONCE_OPS top-level ops or more prints every op through its
    kind's compiled printer (none walked first); a small kernel walks the first ops of a kind;
    the text is the same either way."""
    from conftest import FIXTURE_DIR, joined_fixture_module
    from tilebc import codecache
    large = joined_fixture_module(200_000)
    small = tilebc.load(min(FIXTURE_DIR.glob("*/*-13.5.tilebc"), key=lambda p: p.stat().st_size))
    for module, at_once in ((large, True), (small, False)):
        walked = []
        walk = printer_module._walk
        monkeypatch.setattr(printer_module, "_walk",
                            lambda *a, **k: walked.append(1) or walk(*a, **k))
        monkeypatch.setattr(printer_module, "_OP_PRINTERS", {})  # every kind met anew
        monkeypatch.setattr(printer_module, "_USES", {})
        text = print_module(module)
        assert (not walked) is at_once
        monkeypatch.setattr(codecache, "COMPILE_AT_ONCE_OPS", 1 << 60)
        monkeypatch.setattr(printer_module, "_OP_PRINTERS", {})
        monkeypatch.setattr(printer_module, "_USES", {})
        assert print_module(module) == text
        monkeypatch.undo()
