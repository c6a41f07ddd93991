"""tilebc runtime: Tile IR -> PTX -> cubin (nvJitLink), an on-disk cubin cache, and kernel launch.

Importing this package never touches the CUDA driver; the driver is opened on first launch.
"""
__version__ = "0.1.0"
