"""The launcher's errors, apart from args.py so that compiling (cli.py, launch.compile_entry) can
raise them without loading argument packing."""
from tilebc.errors import TilebcError


class LaunchError(TilebcError):
    """A kernel cannot be launched as asked (nothing was launched)."""


class ArgumentError(LaunchError):
    """A launch argument does not fit the kernel's signature."""
