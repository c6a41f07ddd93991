"""The runtime's version, in a module of its own so that its modules can read it without importing
the package (which imports them)."""
__version__ = "0.1.0"
