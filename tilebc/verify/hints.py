"""Optimization hints: which architecture keys, which hints per op, and their value ranges.

`optimization_hints=<sm_100 = {num_cta_in_cga = 2}, default = {...}>` maps an architecture (or
`default`, the fallback for targets without their own entry) to a dictionary of hints. The rules
are NVIDIA's (public cuda-tile sources, AttrDefs.td and Attributes.cpp):

* 13.1 and 13.2 compilers refuse any problem below as an error, know no `default` key (cuTile
  writes `sm_XX` there) and no `num_worker_warps_per_cta`;
* from 13.3 on NVIDIA's verifier only warns, and only when asked to: tileiras 13.5 compiles every
  hint problem silently (probed: unknown keys, out-of-range values, hints on the wrong op) and
  ignores the offending hint. So these are warnings here: accepted by tileiras, but meaningless.

A hint entry that is not a dictionary is an error: NVIDIA's reader refuses it.
"""
from __future__ import annotations


from ..ir.attrs import BoolAttr, DictionaryAttr, IntegerAttr, OptimizationHintsAttr
from ..ir.types import i1
from ..ops.table import by_mnemonic
from ..version import Version
from .diagnostics import WARNING, Collector

V13_3 = Version(13, 3)
DEFAULT = "default"
# Architecture keys: NVIDIA's list, plus sm_107, which tileiras 13.5 accepts as a --gpu-name.
ARCHITECTURES = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
                 "sm_107", "sm_110", "sm_120", "sm_121")
# Ampere and Ada have no thread-block clusters: a CGA holds one CTA.
SINGLE_CTA = ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89")

ENTRY_HINTS = ("num_cta_in_cga", "num_worker_warps_per_cta", "occupancy")
# Hints each op takes (by mnemonic); "entry" is the kernel itself.
HINTS_FOR: dict[str, tuple[str, ...]] = by_mnemonic({
    "entry": ENTRY_HINTS,
    "load_view_tko": ("latency", "allow_tma"),
    "store_view_tko": ("latency", "allow_tma"),
    "load_ptr_tko": ("latency",),
    "store_ptr_tko": ("latency",),
}, "optimization hints")
NEWER_HINTS = {"num_worker_warps_per_cta": V13_3}


def _integer(value):
    return value.value if isinstance(value, IntegerAttr) and value.type != i1 else None


# What a check found wrong, as a template on "{hint}" (arch.name) in NVIDIA's words, which
# their tests check (cuda-tile's entry_opt_hints_*.mlir); "" when the value is fine.
_NOT_INTEGER = "integer value expected for {hint}"


def _power_of_two_up_to(limit: int):
    def check(arch: str, value) -> str:
        number = _integer(value)
        if number is None:
            return _NOT_INTEGER
        if number <= 0 or number > limit or number & (number - 1):
            return f"expected power-of-two \u2264 {limit} for {{hint}} (1 to {limit})"
        return ""
    return check


def _range(low: int, high: int):
    def check(arch: str, value) -> str:
        number = _integer(value)
        if number is None:
            return _NOT_INTEGER
        return "" if low <= number <= high else \
            f"integer value in the range [{low}, {high}] is expected for {{hint}}"
    return check


def _num_cta_in_cga(arch: str, value) -> str:
    if arch in SINGLE_CTA and _integer(value) is not None and _integer(value) != 1:
        return f"{{hint}} must be 1 on {arch}, which has no clusters"
    return _power_of_two_up_to(16)(arch, value)


def _boolean(arch: str, value) -> str:
    is_bool = isinstance(value, BoolAttr) or (isinstance(value, IntegerAttr) and value.type == i1)
    return "" if is_bool else "boolean value expected for {hint}"


# hint -> check(arch, value) returning what was expected ("" when the value is fine)
VALUE_CHECKS = {
    "num_cta_in_cga": _num_cta_in_cga,
    # NVIDIA clamps values other than 4 and 8 into [4, 8] without a word
    "num_worker_warps_per_cta": _power_of_two_up_to(32),
    "occupancy": _range(1, 32),
    "latency": _range(1, 10),
    "allow_tma": _boolean,
}


def check_hints(ctx: Collector, node, owner: str, hints, version: Version) -> None:
    """Report problems of `hints` (an OptimizationHintsAttr or None) found on `node`, an entry
    (owner "entry") or a load/store op (owner = its mnemonic)."""
    if hints is None:
        return
    if not isinstance(hints, OptimizationHintsAttr):
        ctx.report("hints.entry", node, f"optimization_hints must be an optimization_hints "
                                        f"attribute, got {hints!r}")
        return
    allowed = HINTS_FOR.get(owner, ())
    for arch, hint_dict in hints.entries:
        if not isinstance(hint_dict, DictionaryAttr):
            ctx.report("hints.entry", node, f"hints for {arch} must be a dictionary, got "
                                            f"{hint_dict!r}")
            continue
        if arch == DEFAULT and version < V13_3:
            ctx.report("hints.key", node, f"hint key default needs bytecode {V13_3} (13.1 and "
                       f"13.2 compilers refuse it; name an architecture such as sm_90)", WARNING)
        elif arch != DEFAULT and arch not in ARCHITECTURES:
            ctx.report("hints.key", node, f"unknown hint key {arch}; expected default or one of "
                                          f"{', '.join(ARCHITECTURES)}", WARNING)
            continue
        for name, value in hint_dict.entries:
            if name not in VALUE_CHECKS:
                ctx.report("hints.param", node, f"{name} is not known hint for current Operation "
                                                f"({arch}; {owner} takes {', '.join(allowed)})",
                           WARNING)
            elif name not in allowed:
                ctx.report("hints.param", node, f"hint {name} does not apply to {owner}; it "
                                                f"takes {', '.join(allowed)}", WARNING)
            elif NEWER_HINTS.get(name, version) > version:
                ctx.report("hints.version", node, f"hint {name} needs bytecode "
                                                  f"{NEWER_HINTS[name]}, module is {version}",
                           WARNING)
            else:
                expected = VALUE_CHECKS[name](arch, value)
                if expected:
                    ctx.report("hints.value", node, expected.format(hint=f"{arch}.{name}")
                               + f", got {_show(value)}", WARNING)


def _show(value) -> str:
    if isinstance(value, (IntegerAttr, BoolAttr)):
        return str(value.value).lower() if isinstance(value, BoolAttr) else str(value.value)
    return repr(value)
