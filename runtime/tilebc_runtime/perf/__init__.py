"""A performance model over the PTX emulator: static facts from NVIDIA's assembler (static.py), a
GPU description and the time estimate (model.py), each PTX instruction's class and tensor-core
work (ptx_classes.py, shared with the emulator's profile), and counts read off PTX text alone
(ptx_counts.py), with which the compiler ranks two lowerings of a kernel. Every time it gives is
an estimate; see benchmarks/MODEL.md for the assumptions and blind spots."""
