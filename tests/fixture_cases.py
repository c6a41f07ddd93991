"""Where the fixture kernels' numpy references live: one registry per kernel family file.

tests/test_interp_fixtures.py holds the probes; each tests/test_interp_<family>.py holds the cases of
fixtures/kernels/<family>.py. scripts/gpu_checks.py and the completeness test read this list.
"""

import numpy as np

from tilebc.interp import run as interp_run

CASE_MODULES = ("test_interp_fixtures", "test_interp_nn", "test_interp_linalg", "test_interp_features",
                "test_interp_datamove", "test_interp_sci")


def run(module, entry, grid, *args, **options):
    """tilebc.interp.run with every `assume` checked: a case whose arguments break what its kernel
    assumes (a shape not divisible as the signature says, say) fails here, as the GPU launcher
    refuses it, instead of passing on the CPU alone."""
    options.setdefault("check_assumptions", True)
    return interp_run(module, entry, grid, *args, **options)


def case_registry():
    """A family's CASES dict (fixture name -> function of the loaded module) and its decorator."""
    cases = {}

    def case(name):
        def register(fn):
            cases[name] = fn
            return fn
        return register

    return cases, case


def f64(a):
    """References are computed in float64."""
    return np.asarray(a).astype(np.float64)


def cdiv(a, b):
    """Ceiling division (grid sizes from problem sizes)."""
    return -(-a // b)
