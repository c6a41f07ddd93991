"""Numerics of Tile IR elements: storage and bit helpers (`numerics`), dtypes and interop
(`dtypes`), exact conversions (`convert`), integer ops (`intops`), cuTile's promotion (`promote`)
and dense constant sizes (`dense`)."""
