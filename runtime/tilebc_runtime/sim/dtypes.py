"""PTX type suffixes and the numpy dtype of a value of each."""
import ml_dtypes
import numpy as np

# PTX type suffix -> numpy dtype of a value of that type
DTYPE = {"b8": np.uint8, "u8": np.uint8, "s8": np.int8, "b16": np.uint16, "u16": np.uint16,
         "s16": np.int16, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "b32": np.uint32,
         "u32": np.uint32, "s32": np.int32, "f32": np.float32, "b64": np.uint64,
         "u64": np.uint64, "s64": np.int64, "f64": np.float64, "pred": np.bool_,
         "f16x2": np.uint32, "bf16x2": np.uint32, "e4m3x2": np.uint16, "e5m2x2": np.uint16,
         "tf32": np.uint32}
DTYPE = {k: np.dtype(v) for k, v in DTYPE.items()}
TYPES = frozenset(DTYPE)
