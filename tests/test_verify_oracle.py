"""The verifier against NVIDIA's tileiras (which runs NVIDIA's own verifier when it loads bytecode):
every invalid case our writer can encode is refused by tileiras, and for attribute values the spec
leaves to the compiler (rounding modes, overflow flags, reduction kinds) our verdict matches it.

Warnings are IR tileiras compiles although it is meaningless: every optimization-hint problem (an
unknown architecture key or hint, a hint on the wrong op, a value out of range) is compiled
silently by tileiras 13.5, which drops the hint (NVIDIA's 13.3+ verifier only warns, and only on
request); 13.1/13.2 compilers refused them. Debug-info problems are errors: tileiras refuses them
with or without -g."""
import pytest

import tilebc
from tilebc import oracles
from tilebc.errors import EncodeError
from tilebc.ir import (Module, PartitionViewType, PointerType, TensorViewType, bf16, f16,
                       f32, f64, f4E2M1FN, f8E4M3FN, f8E8M0FNU, i32, scalar, tf32, tile, token)
from tilebc.ir.builder import new_function
from tilebc.ops import (IntegerOverflow, MemoryOrderingSemantics as Order, MemoryScope,
                        MultimemReductionKind, PtrAttr, RoundingMode, Signedness)
from tilebc.verify import diagnostics
from tilebc.verify.opchecks import ftof_rounding_modes

from conftest import needs_tileiras
from test_verify_invalid import CASES, VALID, zero_i32

pytestmark = needs_tileiras

# Rules where tileiras is more lenient than the spec; the test pins tileiras' behaviour.
TILEIRAS_ACCEPTS = {
    "empty module": "spec 6.2.5 requires at least one item; tileiras compiles an empty module",
    # tilebc is stricter: NVIDIA silently keeps the low 32 bits of debug line numbers
    "location line beyond 32 bits": "tileiras reads line 2**32+7 as 7",
    "lexical block line beyond 32 bits": "tileiras reads line 2**32 as 0",
    "subprogram scopeLine beyond 32 bits": "tileiras reads scopeLine 2**32+76 as 76",
}


def _encodable(case):
    module = case.make()
    try:
        return tilebc.dump(module, module.version)
    except (EncodeError, tilebc.VersionError):
        return None


# Cases our writer refuses (no bytes can carry them) have nothing to show tileiras.
ENCODABLE = [c for c in CASES if c.reload and _encodable(c) is not None]


@pytest.mark.parametrize("case", ENCODABLE, ids=lambda c: c.id)
def test_tileiras_refuses_what_the_verifier_refuses(case):
    data = _encodable(case)
    compiled = oracles.tileiras(data, "sm_100")
    if case.id in TILEIRAS_ACCEPTS or case.severity == "warning":
        assert compiled.ok, compiled.stderr
    else:
        assert not compiled.ok, f"tileiras accepted IR the verifier rejects ({case.rule})"


@pytest.mark.parametrize("name", sorted(VALID))
def test_tileiras_accepts_what_the_verifier_accepts(name):
    """Near misses of the debug-info and hint cases (a subprogram's plain name is free, lexical
    blocks chain to the entry's subprogram, hints in range) compile."""
    compiled = oracles.tileiras(tilebc.dump(VALID[name]()), "sm_100")
    assert compiled.ok, compiled.stderr


def _kernel(params, body) -> Module:
    module = Module(version=tilebc.Version(13, 5))
    builder = new_function(module, "k", params)
    body(builder, *builder.block.args)
    builder.op("return", [[]])
    return module


def _ftof(source, target, mode):
    def body(b, x):
        value = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((2,), f32)])
        if source != f32:
            value = b.op("ftof", [value], [tile((2,), source)],
                         {"rounding_mode": ftof_rounding_modes(f32, source)[0]})
        b.op("ftof", [value], [tile((2,), target)], {"rounding_mode": mode})
    return _kernel([scalar(f32)], body)


def _itof(mode):
    return _kernel([scalar(i32)], lambda b, x: b.op(
        "itof", [x], [scalar(f32)], {"signedness": Signedness.SIGNED, "rounding_mode": mode}))


def _divi(signedness, mode):
    return _kernel([scalar(i32), scalar(i32)], lambda b, x, y: b.op(
        "divi", [x, y], [scalar(i32)], {"signedness": signedness, "rounding": mode}))


def _negi(overflow):
    return _kernel([scalar(i32)], lambda b, x: b.op("negi", [x], [scalar(i32)],
                                                    {"overflow": overflow}))


def _multimem(element, kind):
    def body(b, pointer):
        view_type = TensorViewType(element, (64,), (1,), PtrAttr.MULTICAST)
        view = b.op("make_tensor_view", [pointer, [], []], [view_type])
        parts = b.op("make_partition_view", [view], [PartitionViewType((16,), view_type, (0,))])
        values, loaded = b.op("multimem_load_reduce_view_tko", [parts, [zero_i32(b)], None],
                              [tile((16,), element), token],
                              {"memory_ordering_semantics": Order.WEAK, "reduction": kind})
        b.op("multimem_reduce_view_tko", [parts, values, [zero_i32(b)], loaded], [token],
             {"memory_ordering_semantics": Order.RELAXED, "memory_scope": MemoryScope.DEVICE,
              "reduction": kind})
    return _kernel([scalar(PointerType(element, PtrAttr.MULTICAST))], body)


MODES = (RoundingMode.NEAREST_EVEN, RoundingMode.ZERO, RoundingMode.POSITIVE_INF,
         RoundingMode.NEGATIVE_INF, RoundingMode.NEAREST_AWAY, RoundingMode.APPROX)
VARIANTS = (
    [(f"ftof {s}->{t} {m.keyword}", lambda s=s, t=t, m=m: _ftof(s, t, m))
     for s, t in ((f32, f16), (f16, f32), (f32, tf32), (f32, f8E8M0FNU), (f32, f8E4M3FN),
                  (f16, bf16), (f64, f32), (f64, tf32), (f16, tf32), (f8E8M0FNU, f32),
                  (f8E8M0FNU, f64), (f4E2M1FN, f8E4M3FN)) for m in MODES]
    + [(f"itof {m.keyword}", lambda m=m: _itof(m)) for m in MODES]
    + [(f"divi {s.keyword} {m.keyword}", lambda s=s, m=m: _divi(s, m)) for s in Signedness
       for m in (RoundingMode.ZERO, RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF,
                 RoundingMode.NEAREST_EVEN)]
    + [(f"negi {o.keyword}", lambda o=o: _negi(o)) for o in IntegerOverflow]
    + [(f"multimem {e} {k.keyword}", lambda e=e, k=k: _multimem(e, k))
       for e, kinds in ((f32, MultimemReductionKind), (f16, (MultimemReductionKind.MIN,)),
                        (i32, (MultimemReductionKind.UMIN, MultimemReductionKind.XOR)))
       for k in kinds]
)


@pytest.mark.parametrize("make", [v[1] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_attribute_values_agree_with_tileiras(make):
    module = make()
    errors = [str(d) for d in diagnostics(module) if d.severity == "error"]
    compiled = oracles.tileiras(tilebc.dump(module), "sm_100")
    assert compiled.ok == (not errors), (errors, compiled.stderr[:300])
