"""Lowering hooks by op mnemonic, checked against the op table.

Every body op of the op table must appear either in LOWERINGS (a hook) or in NOT_LOWERED (with the
reason it is not lowered yet); `runtime/tests/test_rt_lowering_coverage.py` enforces this.
"""
from __future__ import annotations

from collections.abc import Callable

from tilebc.ops.table import OPS_BY_MNEMONIC, by_mnemonic

LOWERINGS: dict[str, Callable] = {}
EXPANDING: set = set()  # mnemonics whose lowering expands each element (see `lowers`)

NOT_LOWERED: dict[str, str] = by_mnemonic({
    "multimem_load_reduce_view_tko": "multicast (NVLink SHARP) memory needs multimem.* on sm_90 "
                                     "with multicast objects; not lowered",
    "multimem_reduce_view_tko": "multicast memory: not lowered",
    "multimem_store_view_tko": "multicast memory: not lowered",
}, "ops not lowered")


def lowers(*mnemonics: str, expands: bool = False):
    """Register the decorated function as the lowering of each mnemonic. `expands`: the lowering
    emits a long sequence per element (polynomials, softfloat), which the code-size bound charges."""
    def register(function: Callable) -> Callable:
        for mnemonic in mnemonics:
            if expands:
                EXPANDING.add(mnemonic)
            if mnemonic not in OPS_BY_MNEMONIC:
                raise RuntimeError(f"lowering registered for unknown op {mnemonic!r}")
            if mnemonic in LOWERINGS:
                raise RuntimeError(f"two lowerings registered for {mnemonic!r}")
            LOWERINGS[mnemonic] = function
        return function
    return register



# A consumer's family may take a producer op's value in another form than the producer's own
# lowering (an mma stages a view load with cp.async, or a transposed operand from its source):
# mnemonic -> hook(lw, op, lower_now) returning the deferred value, or None to lower it now.
# Registered by the consumer's module, so the producer's module never imports it.
DEFERRALS: dict[str, Callable] = {}


def defers(mnemonic: str):
    """Register the decorated function as the deferral hook of `mnemonic` (see DEFERRALS)."""
    def register(function: Callable) -> Callable:
        if mnemonic not in OPS_BY_MNEMONIC:
            raise RuntimeError(f"deferral registered for unknown op {mnemonic!r}")
        if mnemonic in DEFERRALS:
            raise RuntimeError(f"two deferrals registered for {mnemonic!r}")
        DEFERRALS[mnemonic] = function
        return function
    return register


def deferred(lw, op, lower_now: Callable):
    """The value a registered consumer takes `op`'s result as, or None (lower it now)."""
    hook = DEFERRALS.get(op.name)
    return hook(lw, op, lower_now) if hook is not None else None


# A family may software-pipeline a `for` across its iterations (matmul: the K loop's cp.async
# stages): hook(lw, for_op, loop) returning an object with prologue() (emitted before the loop
# head) and finish() (after its exit), or None. `loop` carries the loop's registers (iv, upper,
# step, cmp) and its constant trip count or None. Registered by the family, so control_flow
# never imports it.
LOOP_PIPELINES: list = []


def pipelines(function: Callable) -> Callable:
    """Register the decorated function as a loop-pipelining hook (see LOOP_PIPELINES)."""
    LOOP_PIPELINES.append(function)
    return function


def loop_pipeline(lw, op, loop):
    """The first registered pipeline that takes `for` op `op`, or None."""
    for hook in LOOP_PIPELINES:
        plan = hook(lw, op, loop)
        if plan is not None:
            return plan
    return None


# Hooks run by `for` before its loop head (hook(lw, for_op)): a family may compute there what its
# ops in the body need from values defined before the loop (loop-invariant operand fragments).
BEFORE_LOOP: list[Callable] = []


def before_loops(function: Callable) -> Callable:
    """Register the decorated function as a BEFORE_LOOP hook."""
    BEFORE_LOOP.append(function)
    return function
