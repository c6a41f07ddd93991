"""Seeded mutation fuzzing of the reader (the short CI pass; `python -m fuzz.run` is the long one).

Mutations of the real cuTile fixtures (byte flips and sets, truncation, insertions/deletions, section
splices between files and versions, stretched varints, inflated counts, relabelled versions) must:
raise nothing but DecodeError; give the same verdict (and IR) through the fast and the careful
decoder and through lazy and strict debug decoding; take < 1 s each. A sample goes to NVIDIA's
tileirdisasm: every disagreement must be one of the triaged kinds in fuzz/harness.py.
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tilebc  # noqa: E402
from fuzz.harness import NvidiaOracle, check, classify, compare_text  # noqa: E402
from fuzz.mutate import MUTATORS, corpus, mutate  # noqa: E402

from conftest import CaseFailures, fixture_kernels  # noqa: E402

CI_INPUTS = 20_000
CI_PARTS = 4
POOL = corpus()
FIXTURE_KERNELS = fixture_kernels()


def test_corpus_covers_every_version():
    assert {data[8:10] for _, data in POOL} == {bytes([13, m]) for m in range(1, 6)}


@pytest.mark.parametrize("name", sorted(MUTATORS))
def test_mutator_changes_input(name):
    """Each mutator produces different bytes for most inputs (a no-op mutator would fuzz nothing)."""
    rng = random.Random(name)
    changed = sum(MUTATORS[name](data, rng, POOL) != data for _, data in POOL[:50])
    assert changed >= 40, f"{name} changed only {changed} of 50 inputs"


@pytest.mark.parametrize("part", range(CI_PARTS))
def test_fuzz_ci_pass(part, frozen_heap):
    """>= 20,000 mutated inputs in well under 3 minutes, every invariant of fuzz.harness.check.

    Input i is mutated by random.Random(i) (a failure names i, so it reruns alone); the inputs
    come in CI_PARTS parts so that the test workers share them. Plain seeded generators instead of
    Hypothesis' (whose engine cost ~40 % over the checks themselves): the mutators draw all
    their choices from the generator either way. Time is CPU time (a loaded CI machine must not
    fail it); the limits guard against hangs and blow-ups, the speed figures themselves are
    recorded by `python -m fuzz.run`."""
    per_part = -(-CI_INPUTS // CI_PARTS)
    seen = {"inputs": 0, "accepted": 0}
    started = time.process_time()
    for i in range(part * per_part, (part + 1) * per_part):
        rng = random.Random(i)
        name, data = POOL[rng.randrange(len(POOL))]
        mutated, used = mutate(data, rng, POOL)
        outcome = check(mutated)
        seen["inputs"] += 1
        seen["accepted"] += outcome.accepted
        where = f"input {i}: {name} via {used}"
        assert outcome.foreign is None, f"{where}: {outcome.foreign}"
        assert not outcome.problems, f"{where}: {outcome.problems}"
        assert outcome.cpu_seconds < 1.0, f"{where}: {outcome.cpu_seconds:.2f} s CPU"
    elapsed = time.process_time() - started
    assert seen["inputs"] * CI_PARTS >= CI_INPUTS, seen
    assert seen["accepted"] > 0, "no mutated input decoded: the mutations are too destructive"
    assert elapsed < 180 / CI_PARTS, f"CI fuzz pass part {part} took {elapsed:.0f} s of CPU"


def test_nvidia_differential_sample():
    """NVIDIA accepts => we decode and verify (up to triaged stricter rules), and print the same
    text; NVIDIA rejects => we reject. 150 inputs, about 2 s of tileirdisasm."""
    oracle = NvidiaOracle()
    if not oracle.available:
        pytest.skip("tileirdisasm (pip package nvidia-cuda-tileiras) is not installed")
    rng = random.Random(20261121)
    untriaged = []
    try:
        for _ in range(150):
            name, data = rng.choice(POOL)
            mutated, used = mutate(data, rng, POOL)
            ours = check(mutated)  # decodes, verifies and prints
            accepts, message, text = oracle.run(mutated, text=True)
            if accepts != ours.valid:
                category, why = classify(ours, accepts, message)
                if category in ("untriaged", "invalid"):
                    untriaged.append(f"{name} via {used}: {why}")
            elif accepts and compare_text(ours, text):
                untriaged.append(f"{name} via {used}: text differs: {compare_text(ours, text)}")
    finally:
        oracle.close()
    assert not untriaged, untriaged


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_fast_decoder_on_fixture(fixture_kernel):
    """Every real fixture goes through the fast decoder without falling back, and the fast decoder
    (every op compiled), the default mix (ops seen a few times read carefully in the fast loop),
    the careful decoder and lazy/strict debug decoding all build the same IR."""
    from fuzz.harness import _careful_load, _materialise, ir_signature
    from tilebc.binary.reader import ModuleReader
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            data = path.read_bytes()
            reader = ModuleReader(data, str(path), lazy_debug=False)
            reader.fast_compile_after = 0
            strict = reader.read()
            assert reader.fast_fallbacks == 0
            lazy = tilebc.load(data)
            _materialise(lazy)
            careful = _careful_load(data)
            assert ir_signature(strict) == ir_signature(careful) == ir_signature(lazy)
    failures.raise_any()


def test_abandoned_fast_path_frees_its_work():
    """Inputs the fast decoder gives back must not leave anything alive (a shared exception
    instance once kept every abandoned body reachable through its ever-growing traceback)."""
    import gc
    from test_malformed import addf, module_bytes
    from tilebc.binary.reader import ModuleReader
    # 300 valid addf ops, then one with an unknown flag bit: the fast decoder builds 300 ops
    # before it gives the body back to the careful reader.
    broken = module_bytes(body=addf(0) * 300 + b"\x02\x01\x40\x00\x00\x00" + b"\x5c\x00\x00")
    reader = ModuleReader(broken, strict=True)
    with pytest.raises(tilebc.DecodeError, match="addf has unknown flag bits 0x40"):
        reader.read()
    assert reader.fast_fallbacks == 1
    counts = []
    for rounds in (5, 50):
        for _ in range(rounds):
            _attempt_load(broken)
        gc.collect()
        counts.append(len(gc.get_objects()))
    assert counts[1] - counts[0] < 1000, f"objects grew from {counts[0]} to {counts[1]}"


def _attempt_load(data):
    try:
        tilebc.load(data, lazy_debug=False, strict=True)
    except tilebc.DecodeError:
        pass


# ---- regressions the text differential found -----------------------------------------------------

def _compare_with_tileirdisasm(module: tilebc.Module, version: str) -> str:
    """Dump `module`, print it with tilebc and with tileirdisasm; both must accept and agree."""
    from tilebc.text import print_module
    oracle = NvidiaOracle()
    if not oracle.available:
        pytest.skip("tileirdisasm (pip package nvidia-cuda-tileiras) is not installed")
    data = tilebc.dump(module, version)
    try:
        accepted, message, theirs = oracle.run(data, text=True)
    finally:
        oracle.close()
    assert accepted, message
    ours = print_module(tilebc.load(data))
    assert ours == theirs
    return ours


def _fixture(name: str, version: str) -> tilebc.Module:
    return tilebc.load((ROOT / "fixtures" / "bytecode" / name / f"{name}-{version}.tilebc").read_bytes())


def test_hint_names_print_like_tileirdisasm():
    """tileirdisasm sorts hint dictionaries by name and writes hint names as they are (no quotes),
    whatever order and spelling the file has."""
    from tilebc.ir import attrs as A
    module = _fixture("load_store_hints", "13.5")
    op = next(o for o in module.functions[0].walk() if "optimization_hints" in o.attrs)
    (_, inner), = op.attrs["optimization_hints"].entries
    assert len(inner.entries) >= 2, "the fixture's first hinted op should carry several hints"
    shuffled = A.DictionaryAttr(tuple(reversed(inner.entries)) + (("a b/c", inner.entries[0][1]),))
    op.attrs["optimization_hints"] = A.OptimizationHintsAttr(
        (("sm_90", shuffled), ("sm_100", inner), ('we"ird', A.DictionaryAttr(()))))
    module.functions[0].optimization_hints = A.OptimizationHintsAttr(
        (("z", A.DictionaryAttr(())), ("default", A.DictionaryAttr(()))))
    text = _compare_with_tileirdisasm(module, "13.5")
    assert "sm_100 = {" in text and "a b/c = " in text  # the edit reached the printed text


def test_string_escapes_print_like_tileirdisasm():
    """Quotes print as \\22 (LLVM's printEscapedString), backslashes doubled, other bytes hex."""
    module = _fixture("assert", "13.5")
    op = next(o for o in module.functions[0].walk() if o.spec.mnemonic == "assert")
    op.attrs["message"] = 'say "hi" \\ \x01 é'
    text = _compare_with_tileirdisasm(module, "13.5")
    assert '"say \\22hi\\22 \\\\ \\01 \\C3\\A9"' in text


@pytest.mark.parametrize("where", ["entry", "op"])
def test_hint_name_with_newline_is_tileirdisasm_quirk_not_ours(where):
    """A hint name holding a newline prints raw; tileirdisasm then shifts spaces through its whole
    output (found by the differential on an op's hints). The texts agree word for word, and the
    harness calls it NVIDIA's quirk, on an entry's hints and on an op's."""
    from fuzz.harness import text_quirk
    from tilebc import oracles
    from tilebc.ir.attrs import DictionaryAttr, OptimizationHintsAttr
    module = tilebc.load(ROOT / "fixtures" / "bytecode" / "matmul_f16" / "matmul_f16-13.5.tilebc")
    hints = OptimizationHintsAttr((("odd\nname", DictionaryAttr(())),))
    if where == "entry":
        module.functions[0].optimization_hints = hints
    else:
        op = next(op for op in module.walk() if "optimization_hints" in op.attrs)
        op.attrs["optimization_hints"] = hints
    data = tilebc.dump(module, "13.5")
    theirs = oracles.tileirdisasm(data)
    assert theirs.ok
    ours = tilebc.print_module(tilebc.load(data))
    assert ours != theirs.stdout and ours.split() == theirs.stdout.split()
    assert text_quirk(ours, theirs.stdout) is not None
