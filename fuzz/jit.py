"""Fuzzing the JIT and the CPU interpreter with modules that `tilebc.load` accepts.

The promise checked: for any module that decodes and verifies,
* `tilebc_runtime.compile(module, arch=sm_80|sm_90, emit="ptx")` returns PTX (which nvJitLink
  links, checked on a sample) or raises a TilebcError; never another exception, never slowly;
* `tilebc.interp.run` with arguments bound per the entry's signature runs or raises a TilebcError
  (bounded by `max_iterations` and an alarm on the process's CPU time).

Inputs come from the cuTile fixtures through two kinds of mutation:
* IR-level (`IR_MUTATORS`): decode a fixture, change one thing the verifier may still accept
  (an enum or flag attribute, an integer attribute, a constant's bytes, an operand swapped for
  another visible value of the same type, an unused op dropped or a pure op duplicated), encode
  it again and keep it when it loads;
* byte-level (`fuzz.mutate`), keeping the few results that still decode and verify.

Any foreign exception or overrun is a failure, recorded with the seed and index that rebuild it
(`case(seed, index)`), the mutators applied and the traceback.
"""
from __future__ import annotations

import dataclasses
import io
import random
import signal
import time
import traceback
from contextlib import contextmanager
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import tilebc
from tilebc.errors import TilebcError
from tilebc.ir.attrs import DenseElementsAttr
from tilebc.ir.module import Block, Function, Module, Op
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.ops.spec import Arity, AttrKind
from tilebc.record import Record

from . import mutate as bytes_mutate

COMPILE_SECONDS = 5.0   # budget for one compile (PTX for one arch)
RUN_SECONDS = 10.0      # budget for one interpreter launch
MAX_ITERATIONS = 500  # interpreter loop-iteration budget per launch (an iteration can take ms)
ARCHES = ("sm_80", "sm_90")


class Overrun(BaseException):
    """Raised by the alarm when a stage runs past its budget (a BaseException so that no
    `except Exception` inside tilebc swallows it)."""


@contextmanager
def deadline(seconds: float):
    """Overrun after `seconds` of this process's CPU time (all threads): the work a stage does,
    whatever else the machine runs (a wall-clock alarm fired on a busy CI machine)."""
    def fire(signum, frame):
        raise Overrun(f"took more than {seconds:g} s of CPU time")
    previous = signal.signal(signal.SIGPROF, fire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


# ---- IR-level mutators ----------------------------------------------------------------------
# Each takes a decoded module and a random source, changes one thing in place and returns a short
# description, or None when it found nothing to change.

def _ops(module: Module) -> List[Op]:
    return [op for op in module.walk()]


def _scoped_ops(module: Module):
    """(op, block, index in block, values visible before it) for every op in every function."""
    found = []

    def visit(block: Block, visible: List):
        scope = list(visible) + list(block.args)
        for index, op in enumerate(block.ops):
            found.append((op, block, index, scope[:]))
            for region in op.regions:
                for inner in region.blocks:
                    visit(inner, scope)
            scope.extend(op.results)
    for function in module.functions:
        visit(function.body, [])
    return found


def _uses(module: Module) -> Dict[int, int]:
    counts: Dict[int, int] = {}
    for op in module.walk():
        for value in op.operand_values:
            counts[id(value)] = counts.get(id(value), 0) + 1
    return counts


def mutate_enum(module: Module, rng: random.Random) -> Optional[str]:
    choices = [(op, spec) for op in _ops(module) for spec in op.spec.attrs
               if spec.kind is AttrKind.ENUM and spec.enum is not None]
    if not choices:
        return None
    op, spec = rng.choice(choices)
    members = list(spec.enum)
    new = rng.choice(members + ([None] if spec.optional else []))
    op.attrs[spec.name] = new
    return f"{op.name}.{spec.name}={getattr(new, 'name', new)}"


def toggle_flag(module: Module, rng: random.Random) -> Optional[str]:
    choices = [(op, spec) for op in _ops(module) for spec in op.spec.attrs
               if spec.kind in (AttrKind.UNIT, AttrKind.BOOL)]
    if not choices:
        return None
    op, spec = rng.choice(choices)
    old = op.attrs.get(spec.name)
    new = not bool(old)
    op.attrs[spec.name] = (True if new else None) if spec.kind is AttrKind.UNIT else new
    return f"{op.name}.{spec.name}={new}"


def _edge_int(rng: random.Random, old: int, width: int) -> int:
    top = (1 << (width - 1)) - 1
    return rng.choice((0, 1, -1, 2, old + 1, old - 1, old * 2, -old, top, -top - 1,
                       rng.randrange(-64, 64)))


def mutate_int(module: Module, rng: random.Random) -> Optional[str]:
    choices = [(op, spec) for op in _ops(module) for spec in op.spec.attrs
               if spec.kind in (AttrKind.INT, AttrKind.I32_ARRAY, AttrKind.I64_ARRAY)
               and op.attrs.get(spec.name) is not None]
    if not choices:
        return None
    op, spec = rng.choice(choices)
    old = op.attrs[spec.name]
    if spec.kind is AttrKind.INT:
        new = _edge_int(rng, int(old), spec.width)
        if new < 0 and int(old) >= 0 and rng.random() < 0.5:
            new = abs(new) % (1 << spec.width)
    else:
        items = list(old)
        if not items:
            return None
        k = rng.randrange(len(items))
        width = 32 if spec.kind is AttrKind.I32_ARRAY else 64
        items[k] = _edge_int(rng, int(items[k]), width)
        if rng.random() < 0.3:
            rng.shuffle(items)
        new = type(old)(items) if isinstance(old, (list, tuple)) else items
    op.attrs[spec.name] = new
    return f"{op.name}.{spec.name}={new}"


_SPECIAL_BYTES = {
    1: [b"\x00", b"\x01", b"\xff", b"\x80", b"\x7f"],
    2: [b"\x00\x00", b"\xff\xff", b"\x00\x80", b"\xff\x7f", b"\x00\x7c", b"\x00\xfc", b"\x01\x7e",
        b"\x80\x7f", b"\x80\xff", b"\xc0\x7f"],
    4: [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\x00\x00\x00\x80", b"\xff\xff\xff\x7f",
        b"\x00\x00\x80\x7f", b"\x00\x00\x80\xff", b"\x00\x00\xc0\x7f", b"\x01\x00\x00\x00",
        b"\x00\x00\x80\x00", b"\x10\x00\x00\x00"],
    8: [b"\x00" * 8, b"\xff" * 8, b"\x00" * 7 + b"\x80", b"\xff" * 7 + b"\x7f",
        b"\x00" * 6 + b"\xf0\x7f", b"\x00" * 6 + b"\xf8\x7f", b"\x00" * 6 + b"\xf0\xff",
        b"\x01" + b"\x00" * 7],
}


def mutate_constant(module: Module, rng: random.Random) -> Optional[str]:
    """Rewrite one element (or the splat) of a dense constant: edge values, random bytes."""
    choices = [(op, name) for op in _ops(module) for name, value in op.attrs.items()
               if isinstance(value, DenseElementsAttr) and value.data]
    if not choices:
        return None
    op, name = rng.choice(choices)
    attr: DenseElementsAttr = op.attrs[name]
    element = attr.type.element
    size = max(1, element.bits // 8) if str(element) != "i1" else 1
    data = bytearray(attr.data)
    if str(element) == "i1":
        position = rng.randrange(len(data))
        data[position] = rng.choice((0, 1, 0xFF, rng.randrange(256)))
    elif len(data) >= size and len(data) % size == 0:
        position = rng.randrange(len(data) // size) * size
        pool = _SPECIAL_BYTES.get(size, [])
        new = rng.choice(pool) if pool and rng.random() < 0.7 else bytes(
            rng.randrange(256) for _ in range(size))
        data[position:position + size] = new
    else:
        return None
    op.attrs[name] = DenseElementsAttr(attr.type, bytes(data))
    return f"{op.name}.{name} element changed ({element})"


def swap_operand(module: Module, rng: random.Random) -> Optional[str]:
    """Replace one operand by another value of the same type that is visible at the op."""
    for _ in range(20):
        op, _, _, visible = rng.choice(_scoped_ops(module))
        specs = [s for s in op.spec.operands if op.operands.get(s.name) is not None]
        if not specs:
            continue
        spec = rng.choice(specs)
        group = op.operands[spec.name]
        if spec.arity is Arity.VARIADIC:
            if not group:
                continue
            k = rng.randrange(len(group))
            old = group[k]
        else:
            k, old = None, group
        same = [v for v in visible if v is not old and v.type == old.type]
        if not same:
            continue
        new = rng.choice(same)
        if k is None:
            op.operands[spec.name] = new
        else:
            op.operands[spec.name] = tuple(new if i == k else v for i, v in enumerate(group))
        return f"{op.name}.{spec.name} swapped for a visible {old.type}"
    return None


def drop_unused(module: Module, rng: random.Random) -> Optional[str]:
    """Remove an op (no regions, not a terminator) whose results nothing uses."""
    uses = _uses(module)
    choices = [(op, block, index) for op, block, index, _ in _scoped_ops(module)
               if not op.regions and not op.spec.terminator
               and all(uses.get(id(r), 0) == 0 for r in op.results)]
    if not choices:
        return None
    op, block, index = rng.choice(choices)
    del block.ops[index]
    return f"dropped {op.name}"


def duplicate_op(module: Module, rng: random.Random) -> Optional[str]:
    """Repeat an op (no regions, not a terminator) right after itself, same operands."""
    choices = [(op, block, index) for op, block, index, _ in _scoped_ops(module)
               if not op.regions and not op.spec.terminator]
    if not choices:
        return None
    op, block, index = rng.choice(choices)
    copy = Op(op.spec, dict(op.operands), dict(op.attrs), [r.type for r in op.results],
              loc=op.loc)
    block.ops.insert(index + 1, copy)
    return f"duplicated {op.name}"


# element types a consistent retype may swap: same kind, different width
_RETYPE = {"f32": ("f16", "bf16", "f64"), "f16": ("f32", "bf16"), "bf16": ("f32", "f16"),
           "f64": ("f32",), "i32": ("i64", "i16", "i8"), "i64": ("i32",), "i16": ("i32", "i8"),
           "i8": ("i16", "i32")}


def _retype(value, old, new):
    """`value` (a type, or a tuple of them) with element type `old` replaced by `new` throughout."""
    if value == old:
        return new
    if isinstance(value, tuple):
        return tuple(_retype(v, old, new) for v in value)
    if _is_type_record(value) and type(value)._fields:
        changes = {name: _retype(getattr(value, name), old, new)
                   for name in type(value)._init_fields()}
        return value.replace(**changes)
    return value


def _is_type_record(value) -> bool:
    """An IR type (a Record of tilebc.ir.types)."""
    return isinstance(value, Record) and type(value).__module__.endswith("types")


def _convert_dense(attr: DenseElementsAttr, old, new) -> DenseElementsAttr:
    from tilebc.interp import numeric_ops
    kind = _retype(attr.type, old, new)
    values = numeric_ops.dense_to_array(attr, old)
    with np.errstate(all="ignore"):  # out-of-range values wrap / saturate: any bytes will do
        data = np.asarray(values).astype(numeric_ops.memory_dtype(new)).reshape(-1)
    if attr.is_splat:
        data = data[:1]
    return DenseElementsAttr(kind, data.tobytes())


def retype(module: Module, rng: random.Random) -> Optional[str]:
    """Change one element type to another of its kind everywhere in the module: values, the
    entries' signatures, type attributes and constants (their values converted)."""
    present = sorted({str(t.element) for op in module.walk() for t in
                      (r.type for r in op.results) if isinstance(getattr(t, "element", None),
                                                               type(ELEMENT_TYPES["f32"]))}
                     & set(_RETYPE))
    if not present:
        return None
    old_name = rng.choice(present)
    old, new = ELEMENT_TYPES[old_name], ELEMENT_TYPES[rng.choice(_RETYPE[old_name])]

    def fix_block(block: Block):
        for value in block.args:
            value.type = _retype(value.type, old, new)
        for op in block.ops:
            for value in op.results:
                value.type = _retype(value.type, old, new)
            for key, attr in list(op.attrs.items()):
                if isinstance(attr, DenseElementsAttr) and attr.type.element == old:
                    op.attrs[key] = _convert_dense(attr, old, new)
                elif _is_type_record(attr):
                    op.attrs[key] = _retype(attr, old, new)
            for region in op.regions:
                for inner in region.blocks:
                    fix_block(inner)
    for function in module.functions:
        function.type = _retype(function.type, old, new)
        fix_block(function.body)
    for item in module.globals:
        if item.value.type.element == old:
            item.value = _convert_dense(item.value, old, new)
    return f"{old} -> {new}"


IR_MUTATORS: Dict[str, Callable[[Module, random.Random], Optional[str]]] = {
    "enum": mutate_enum,
    "flag": toggle_flag,
    "int": mutate_int,
    "constant": mutate_constant,
    "swap": swap_operand,
    "drop": drop_unused,
    "duplicate": duplicate_op,
    "retype": retype,
}


# ---- inputs ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    index: int
    seed_name: str
    data: Optional[bytes]          # None: the mutation produced nothing that loads
    mutations: List[str]
    foreign: Optional[str] = None  # traceback when mutating/encoding itself failed


def make_case(seed: int, index: int, pool: Sequence[Tuple[str, bytes]],
              byte_share: float = 0.3) -> Case:
    """Input `index` of the run seeded `seed`: deterministic, so a failure replays alone."""
    rng = random.Random(f"{seed}:{index}")
    name, data = rng.choice(pool)
    if rng.random() < byte_share:
        mutated, names = bytes_mutate.mutate(data, rng, pool)
        return Case(index, name, mutated, [f"bytes:{n}" for n in names])
    module = tilebc.load(data)
    applied = []
    try:
        for _ in range(rng.choice((1, 1, 2, 3))):
            mutator = rng.choice(sorted(IR_MUTATORS))
            what = IR_MUTATORS[mutator](module, rng)
            if what:
                applied.append(f"{mutator}: {what}")
        encoded = tilebc.dump(module, module.version)
    except TilebcError:
        return Case(index, name, None, applied)
    except Exception:
        return Case(index, name, None, applied, foreign=traceback.format_exc())
    return Case(index, name, encoded, applied)


# ---- interpreter arguments ------------------------------------------------------------------

def _random_array(rng: np.random.Generator, element, shape) -> np.ndarray:
    from tilebc.interp import numeric_ops
    try:
        dtype = numeric_ops.memory_dtype(element)
    except TypeError:  # i4 / fp4 arrays have no interpreter layout: hand raw bytes
        dtype = np.dtype(np.uint8)
    count = int(np.prod(shape)) if shape else 1
    if dtype.kind == "b":
        values = rng.integers(0, 2, count).astype(bool)
    elif dtype.kind in "iu":
        values = rng.integers(-8, 9, count).astype(dtype)
    elif dtype.kind == "f" or dtype.kind == "V" or dtype.itemsize <= 2:
        try:
            values = rng.standard_normal(count).astype(np.float32).astype(dtype)
        except (TypeError, ValueError):
            values = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8).view(dtype)
    else:
        values = rng.integers(0, 256, count * dtype.itemsize, dtype=np.uint8).view(dtype)
    return np.ascontiguousarray(values.reshape(shape))


def _extent(rng: np.random.Generator, slot, static) -> int:
    if static is not None:
        return int(static)
    divisor = next((f.divisor for f in slot.facts if f.divisor), None) or 1
    return int(divisor * rng.integers(1, max(2, 64 // divisor + 1)))


def build_arguments(function: Function, rng: np.random.Generator) -> list:
    """Small random host arguments for `function` per its inferred cuTile signature."""
    from tilebc.interp.api import Pointer
    from tilebc_runtime.args import ArrayParam, ListParam, PointerParam, infer_signature
    signature = infer_signature(function)
    args = []
    for param in signature.params:
        if isinstance(param, ArrayParam):
            shape = tuple(_extent(rng, slot, static)
                          for slot, static in zip(param.shape, param.static_shape))
            args.append(_random_array(rng, param.element, shape))
        elif isinstance(param, ListParam):
            element = param.element or ELEMENT_TYPES["f32"]
            shape = tuple(int(rng.integers(1, 33)) for _ in range(param.rank))
            args.append([_random_array(rng, element, shape) for _ in range(int(rng.integers(1, 3)))])
        elif isinstance(param, PointerParam):
            args.append(Pointer(_random_array(rng, param.element, (256,))))
        else:
            element = param.slot.element
            name = str(element)
            if name.startswith("f") or name.startswith("bf"):
                args.append(float(rng.standard_normal()))
            elif name == "i1":
                args.append(bool(rng.integers(0, 2)))
            else:
                args.append(int(rng.integers(0, 9)))
    return args


# ---- the harness ----------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    case: Case
    loaded: bool = False
    stages: Dict[str, str] = dataclasses.field(default_factory=dict)  # stage -> ok / error kind
    failures: List[Tuple[str, str]] = dataclasses.field(default_factory=list)  # (stage, traceback)
    seconds: Dict[str, float] = dataclasses.field(default_factory=dict)


def _stage(result: Result, name: str, budget: float, action: Callable[[], object]):
    """Run one stage: a TilebcError is an accepted outcome; anything else is a failure."""
    start = time.perf_counter()
    try:
        with deadline(budget):
            value = action()
        result.stages[name] = "ok"
        return value
    except TilebcError as error:
        result.stages[name] = type(error).__name__
        return None
    except Overrun as overrun:
        result.stages[name] = "overrun"
        result.failures.append((name, f"Overrun: {overrun}"))
        return None
    except RecursionError:
        result.stages[name] = "RecursionError"
        result.failures.append((name, traceback.format_exc(limit=8)))
        return None
    except Exception:
        result.stages[name] = "foreign"
        result.failures.append((name, traceback.format_exc()))
        return None
    finally:
        result.seconds[name] = time.perf_counter() - start


def check(case: Case, *, link: bool = False, interpret: bool = True,
          arches: Sequence[str] = ARCHES) -> Result:
    """Load+verify the case, compile it to PTX for each arch (linking with nvJitLink when `link`),
    and run the first entry on the interpreter with random arguments over 1-2 tile blocks."""
    from tilebc_runtime.compiler import compile as jit_compile, link_ptx
    from tilebc_runtime import targets
    result = Result(case)
    if case.foreign:
        result.failures.append(("mutate", case.foreign))
    if case.data is None:
        return result
    module = _stage(result, "load", COMPILE_SECONDS, lambda: tilebc.load(case.data))
    if module is None:
        return result
    result.loaded = True
    for arch in arches:
        compiled = _stage(result, f"ptx-{arch}", COMPILE_SECONDS,
                          lambda: jit_compile(module, arch=arch, emit="ptx"))
        if compiled is not None and link:
            _stage(result, f"link-{arch}", COMPILE_SECONDS * 4,
                   lambda: link_ptx(compiled.ptx, targets.parse_arch(arch), module=module))
    if interpret and module.functions:
        rng = np.random.default_rng(case.index)
        function = module.functions[0]
        # one or two tile blocks, along x, y or z (block ids other than x vary only then)
        grid = [(1,), (2,), (1, 2), (1, 1, 2)][int(rng.integers(0, 4))]

        def run():
            args = build_arguments(function, rng)
            return tilebc.interp.run(module, function.name, grid, *args,
                                     max_iterations=MAX_ITERATIONS, print_stream=io.StringIO())
        report = _stage(result, "interp", RUN_SECONDS, run)
        # the batched run hides its own internal errors behind a one-by-one rerun: count them
        if report is not None and report.reason and "failed internally" in report.reason:
            result.stages["interp-batch"] = "foreign"
            result.failures.append(("interp-batch", report.reason))
    return result


def replay(seed: int, index: int, pool=None, **options) -> Result:
    """Rebuild input `index` of the run seeded `seed` and check it again."""
    pool = pool if pool is not None else bytes_mutate.corpus()
    return check(make_case(seed, index, pool), **options)
