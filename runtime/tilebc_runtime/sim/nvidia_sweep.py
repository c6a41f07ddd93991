"""Sweep: every fixture case of tests/test_interp_*.py run through tileiras's PTX on the emulator
(the case modules' `run` swapped for `sim.nvidia.run`), one line per fixture with the outcome.

    python -m tilebc_runtime.sim.nvidia_sweep [--arch sm_80|sm_89|sm_90] [--version 13.5] [NAME ...]
    python -m tilebc_runtime.sim.nvidia_sweep --gemms     # tileiras's sm_90 wgmma and TMA GEMMs

Outcomes: pass; mismatch (the case's reference check failed); unsupported (the emulator refuses
an instruction or form: the message names it); tileiras (NVIDIA's compiler refused the module);
error (anything else, with its message). Run from the repository root (needs tests/ on the path).
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

from . import nvidia
from .errors import PtxSyntaxError, UnsupportedInstruction


def case_functions(names=None):
    """(family module, fixture name) for every fixture case, the probes first."""
    root = Path(__file__).resolve().parents[3]
    sys.path.insert(0, str(root / "tests"))
    from fixture_cases import CASE_MODULES
    for family in CASE_MODULES:
        reference = importlib.import_module(family)
        for name in sorted(reference.CASES):
            if not names or name in names:
                yield reference, name


def outcome(reference, name, version, arch):
    """(status, detail) of one fixture case on tileiras's PTX."""
    versions = reference.versions(name)
    version = version if version in versions else versions[-1]
    original = reference.run

    def run(*args, **kwargs):
        return nvidia.run(*args, arch=arch, **kwargs)
    reference.run = run
    try:
        reference.CASES[name](reference.module(name, version))
        return "pass", ""
    except AssertionError as error:
        return "mismatch", " ".join(str(error).split())[:300]
    except nvidia.TileirasError as error:
        return "tileiras", str(error)[:300]
    except (UnsupportedInstruction, PtxSyntaxError) as error:
        return "unsupported", str(error).replace(str(getattr(error, "file", "")), "")[:300]
    except Exception as error:  # noqa: BLE001 - a sweep reports every failure and goes on
        last = traceback.extract_tb(error.__traceback__)[-1]
        return "error", f"{type(error).__name__}: {error} ({Path(last.filename).name}:" \
                        f"{last.lineno})"[:300]
    finally:
        reference.run = original


def gemm_outcomes():
    """(name, status, seconds, detail) of runtime/tests/test_rt_sim_nvidia_sm90.py's cuTile
    GEMMs (64x128x64 tiles: tileiras's sm_90 code uses wgmma) in every operand type, then its
    TMA GEMMs (aligned operands: tileiras moves the tiles with cp.async.bulk.tensor)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    cases = importlib.import_module("test_rt_sim_nvidia_sm90")
    checks = [(name, cases.check_gemm) for name in cases.GEMMS] + \
        [(f"tma {name}", cases.check_tma_gemm) for name in cases.TMA_GEMMS]
    for name, check in checks:
        start = time.perf_counter()
        try:
            check(name.split()[-1])
            status, detail = "pass", ""
        except AssertionError as error:
            status, detail = "mismatch", " ".join(str(error).split())[:300]
        except Exception as error:  # noqa: BLE001 - report and go on
            status, detail = "error", f"{type(error).__name__}: {error}"[:300]
        yield name, status, time.perf_counter() - start, detail


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--arch", default=nvidia.DEFAULT_ARCH)
    parser.add_argument("--version", default="13.5")
    parser.add_argument("--gemms", action="store_true",
                        help="run the sm_90 wgmma GEMMs of every operand type and the TMA "
                             "GEMMs instead")
    options = parser.parse_args(argv)
    counts = {}
    if options.gemms:
        for name, status, seconds, detail in gemm_outcomes():
            counts[status] = counts.get(status, 0) + 1
            print(f"| {name} | {status} | {seconds:.1f} s | {detail} |", flush=True)
        print(" ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        return 0
    for reference, name in case_functions(set(options.names)):
        start = time.perf_counter()
        status, detail = outcome(reference, name, options.version, options.arch)
        counts[status] = counts.get(status, 0) + 1
        print(f"| {name} | {status} | {time.perf_counter() - start:.1f} s | {detail} |",
              flush=True)
    print(" ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
