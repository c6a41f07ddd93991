"""A PTX emulator for the JIT's output: parse PTX, run a grid on host numpy memory (the CPU
interpreter's address space), vectorised over the threads of a CTA.

    from tilebc_runtime.sim import run, emulate, load_kernel, IMPLEMENTED
    run(module, entry, grid, *args)            # like tilebc.interp.run, through JIT PTX
    emulate(ptx_text, entry, grid, params, memory=GlobalMemory(), threads=128)
    emulate(..., profile=Profile())            # opt-in counts per warp (profile.py)

See machine.py (execution model), state.py (memories, races), fp.py (float semantics and the error
of the approximations), syntax.py / parser.py (PTX text to a syntax tree) and isa*.py (instruction
semantics, registered into registry.py; IMPLEMENTED lists them; isa_sm90.py: Hopper's wgmma,
mbarrier and bulk copies). Modules import one another one way (runtime/tests/test_rt_sim_imports.py):
a new semantics module imports its helpers from registry.py and is imported here.
"""
from .errors import (PtxSyntaxError, SharedRaceError, SimExecutionError, SimMemoryError, SimTrap,
                     UnsupportedInstruction)
# the semantics modules register their instructions into the registry on import
from . import isa, isa_control, isa_extra, isa_memory, isa_mma, isa_sm90  # noqa: F401
from .registry import BUILDERS, IMPLEMENTED
from .machine import KernelImage, emulate, load_kernel, pack_params
from .parser import parse_ptx
from .profile import Profile
from .runner import compiled_kernel, run

__all__ = ["run", "emulate", "load_kernel", "pack_params", "parse_ptx", "compiled_kernel",
           "KernelImage", "Profile", "IMPLEMENTED", "BUILDERS", "PtxSyntaxError", "UnsupportedInstruction",
           "SimExecutionError", "SimMemoryError", "SharedRaceError", "SimTrap"]
