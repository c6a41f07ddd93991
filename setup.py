"""Optional C helpers (the text tools, the bytecode reader); the rest of the build is in
pyproject.toml."""
from setuptools import Extension, setup

# optional: without a C compiler the build goes on and tilebc runs its pure-Python paths
SOURCES = ["tilebc/_speedups.c", "tilebc/_opdecoder.c", "tilebc/_printer.c",
           "tilebc/_verifier.c", "tilebc/_opencoder.c",
           "tilebc/_opparser.c"]
setup(ext_modules=[Extension("tilebc._speedups", SOURCES, depends=["tilebc/_speedups.h"],
                             optional=True)])
