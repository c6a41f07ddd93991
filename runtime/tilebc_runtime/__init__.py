"""tilebc runtime: Tile IR -> PTX -> cubin (nvJitLink), an on-disk cubin cache, and kernel launch.

Importing this package never touches the CUDA driver; the driver is opened on first launch.
"""
from ._version import __version__  # noqa: F401 (re-exported)


def compile(source, entry=None, arch="sm_90", emit="cubin", **options):
    """Compile Tile IR bytecode to PTX (emit="ptx") or a cubin (emit="cubin"); see compiler.compile."""
    from .compiler import compile as _compile
    return _compile(source, entry, arch, emit, **options)


def ptx_isa_for(arch) -> str:
    """The PTX ISA version the JIT emits for `arch` with the installed nvJitLink, e.g. '7.8'."""
    from .targets import choose_ptx_version, installed_nvjitlink, parse_arch
    major, minor = choose_ptx_version(parse_arch(arch), installed_nvjitlink())
    return f"{major}.{minor}"


def demo_compile(module, arch=None) -> str:
    """One summary line for `tilebc demo`: entry, arch, PTX/cubin sizes, threads; with a GPU also
    a launch compared with the CPU interpreter (see demo.demo_compile)."""
    from .demo import demo_compile as _demo_compile
    return _demo_compile(module, arch)


def load(source, **options):
    """Load bytecode for launching: see launch.load (backend="jit" | "tileiras", cache=, options=)."""
    from .launch import load as _load
    return _load(source, **options)


def __getattr__(name):
    # Launch/cache classes on first use, so `import tilebc_runtime` stays light and driver-free.
    if name in ("Kernel", "LoadedModule", "LaunchError", "BoundLaunch"):
        from . import launch
        return getattr(launch, name)
    if name in ("CubinCache", "KeyFields"):
        from . import cache
        return getattr(cache, name)
    if name == "ArgumentError":
        from .args import ArgumentError
        return ArgumentError
    if name in ("DriverError", "ContextLost"):
        from . import driver
        return getattr(driver, name)
    raise AttributeError(f"module 'tilebc_runtime' has no attribute {name!r}")
