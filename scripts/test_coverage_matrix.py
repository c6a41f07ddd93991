#!/usr/bin/env python3
"""Which stages the test suite runs on which fixture files, read from pytest's own collection.

    python scripts/test_coverage_matrix.py            # summary: stage -> fixture files per version
    python scripts/test_coverage_matrix.py --cells    # also every (stage, fixture file) cell

A collected test is tied to fixture files by its parameters (a path under fixtures/bytecode, a
`name, version` pair, or a `fixture_kernel` name: every file of that kernel, as the tests walk
them); its stages come from STAGES below, keyed by test function. A test that takes a fixture file
but is missing from STAGES is an error, so a new fixture walk must say what it checks. Compare
the output before and after a change to the tests: the cells must not shrink.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "bytecode"

# test function -> the stages it runs on its fixture file (or each of its kernel's files)
STAGES = {
    "test_reencode_same_version": ("decode", "re-encode", "print=tileirdisasm", "print -g=tileirdisasm -g"),
    "test_convert_to_every_version": ("decode", "convert to other versions", "print=tileirdisasm"),
    "test_tileiras_compiles_what_we_write": ("re-encode", "tileiras lowers to PTX"),
    "test_disassembly_reassembles": ("parse/assemble", "print=tileirdisasm"),
    "test_debug_listing_parses_like_plain": ("parse/assemble",),
    "test_debug_listing_reassembles": ("parse/assemble", "print -g=tileirdisasm -g"),
    "test_tileiras_compiles_reassembled": ("parse/assemble", "tileiras lowers to PTX"),
    "test_fixture_matches_tileirdisasm": ("decode", "print=stored listing"),
    "test_fixture_debug_matches_tileirdisasm_g": ("decode", "print -g=stored listing"),
    "test_fixture_verifies_clean": ("decode", "verify"),
    "test_fast_path_agrees_on_fixture": ("decode", "verify fast=full"),
    "test_fast_decoder_on_fixture": ("decode fast=careful=lazy",),
    # the cases check the batched run against their numpy references as well
    "test_batched_runs_match_sequential_runs_bit_for_bit": ("interpret batched=sequential",
                                                            "interpret vs numpy"),
    "test_family_batched_runs_match_sequential_runs_bit_for_bit": ("interpret batched=sequential",
                                                                   "interpret vs numpy"),
    "test_chunked_runs_match_sequential_runs_bit_for_bit": ("interpret chunked=sequential",),
    "test_builder_reproduces_fixture": ("builder reproduces",),
    "test_fixture_on_emulator_matches_reference": ("JIT+emulate vs numpy",),
    "test_family_kernel_on_emulator_matches_reference": ("JIT+emulate vs numpy",),
    "test_each_architectures_own_code_matches_the_references": (
        "JIT every other arch, emulate its own code",),
    "test_fixture_links": ("JIT to PTX, link (sm_80/sm_90)",),
    "test_fixture_links_blackwell": ("JIT to PTX, link (sm_100/sm_120)",),
    "test_oldest_bytecode_links": ("JIT to PTX, link (oldest version)",),
}


def fixtures_of(item):
    """The fixture files a test runs on (paths relative to fixtures/bytecode); empty for none."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if isinstance(value, Path) and value.suffix == ".tilebc" and FIXTURES in value.parents:
            return [str(value.relative_to(FIXTURES))]
    # a per-kernel test walks every version file of its kernel
    kernel = params.get("fixture_kernel")
    if isinstance(kernel, str):
        files = sorted((FIXTURES / kernel).glob("*.tilebc"))
        if not files:
            raise ValueError(f"{item.nodeid}: no fixture files for kernel {kernel!r}")
        return [str(path.relative_to(FIXTURES)) for path in files]
    name, version = params.get("name"), params.get("version")
    if isinstance(name, str) and isinstance(version, str):
        path = FIXTURES / name / f"{name}-{version}.tilebc"
        if path.is_file():
            return [str(path.relative_to(FIXTURES))]
    return []


class Collect:
    def __init__(self):
        self.items = []

    def pytest_collection_modifyitems(self, items):
        self.items = list(items)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", action="store_true", help="list every (stage, fixture) cell")
    parser.add_argument("paths", nargs="*", help="test paths (default: the configured testpaths)")
    args = parser.parse_args(argv)
    collector = Collect()
    with contextlib.redirect_stdout(io.StringIO()):  # the collection listing is not the report
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0",
                            "--rootdir", str(ROOT), *args.paths], plugins=[collector])
    if code not in (0, 5):
        print(f"collection failed (pytest exit status {code})", file=sys.stderr)
        return 1
    all_fixtures = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.tilebc"))
    cells = collections.defaultdict(set)  # stage -> fixture files
    tests = collections.Counter()
    unknown = set()
    fixture_tests = 0
    for item in collector.items:
        fixtures = fixtures_of(item)
        if not fixtures:
            continue
        fixture_tests += 1
        function = item.originalname or item.name
        if function not in STAGES:
            unknown.add(f"{item.path.relative_to(ROOT)}::{function}")
            continue
        for stage in STAGES[function]:
            cells[stage].update(fixtures)
            tests[stage] += 1
    print("# Fixture files x stages, from the test suite's collection")
    print(f"tests collected: {len(collector.items)}; tied to a fixture file: {fixture_tests}; "
          f"fixture files: {len(all_fixtures)}")
    versions = sorted({f.rsplit("-", 1)[1][:-len(".tilebc")] for f in all_fixtures})
    print(f"\n{'stage':42} {'files':>6} " + " ".join(f"{v:>6}" for v in versions) + f" {'tests':>6}")
    for stage in sorted(cells):
        per = collections.Counter(f.rsplit("-", 1)[1][:-len(".tilebc")] for f in cells[stage])
        print(f"{stage:42} {len(cells[stage]):6} " + " ".join(f"{per[v]:6}" for v in versions)
              + f" {tests[stage]:6}")
    never = sorted(set(all_fixtures) - set().union(*cells.values())) if cells else all_fixtures
    print(f"\nfixture files no stage covers: {len(never)}")
    for name in never:
        print(f"  {name}")
    if args.cells:
        print("\n# cells")
        for stage in sorted(cells):
            for fixture in sorted(cells[stage]):
                print(f"{stage}\t{fixture}")
    if unknown:
        print("\ntests that take a fixture file but are missing from STAGES:", file=sys.stderr)
        for name in sorted(unknown):
            print(f"  {name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
