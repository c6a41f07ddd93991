"""tilebc runtime: Tile IR -> PTX -> cubin (nvJitLink), an on-disk cubin cache, and kernel launch.

Importing this package never touches the CUDA driver; the driver is opened on first launch.
"""
__version__ = "0.1.0"


def compile(source, entry=None, arch="sm_90", emit="cubin", **options):
    """Compile Tile IR bytecode to PTX (emit="ptx") or a cubin (emit="cubin"); see compiler.compile."""
    from .compiler import compile as _compile
    return _compile(source, entry, arch, emit, **options)
