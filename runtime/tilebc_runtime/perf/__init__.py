"""A performance model over the PTX emulator: static facts from NVIDIA's assembler (static.py), a
GPU description and the time estimate (model.py). Every time it gives is an estimate; see
benchmarks/MODEL.md for the assumptions and blind spots."""
