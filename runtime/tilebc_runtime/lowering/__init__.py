"""Tile IR -> PTX lowering: one module per op family, hooks registered by op mnemonic."""
