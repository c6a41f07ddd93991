"""Wire tags of the bytecode format: the numbers that say which kind of type, attribute, debug
attribute or function flag follows. The reader and the writer both take them from here."""
from __future__ import annotations

from ..ir import types as T

# Type tags of composite types (element types carry their own tags in ir.types).
TAG_POINTER, TAG_TILE, TAG_TENSOR_VIEW, TAG_PARTITION_VIEW, TAG_FUNCTION, TAG_TOKEN = 12, 13, 14, 15, 16, 17
TAG_GATHER_SCATTER_VIEW, TAG_STRIDED_VIEW = 20, 21
COMPOSITE_TAG_CLASS = {TAG_POINTER: T.PointerType, TAG_TILE: T.TileType,
                       TAG_TENSOR_VIEW: T.TensorViewType, TAG_PARTITION_VIEW: T.PartitionViewType,
                       TAG_FUNCTION: T.FunctionType, TAG_TOKEN: T.TokenType,
                       TAG_GATHER_SCATTER_VIEW: T.GatherScatterViewType,
                       TAG_STRIDED_VIEW: T.StridedViewType}
COMPOSITE_TAG_SINCE = {tag: T.TYPE_KIND_SINCE[cls] for tag, cls in COMPOSITE_TAG_CLASS.items()}

# Tagged attribute kinds.
ATTR_INTEGER, ATTR_FLOAT, ATTR_BOOL, ATTR_TYPE, ATTR_STRING, ATTR_ARRAY = 1, 2, 3, 4, 5, 6
ATTR_DENSE, ATTR_DIV_BY, ATTR_SAME_ELEMENTS, ATTR_DICTIONARY, ATTR_HINTS, ATTR_BOUNDED = 7, 8, 9, 10, 11, 12

# Debug attribute tags.
DEBUG_UNKNOWN, DEBUG_COMPILE_UNIT, DEBUG_FILE, DEBUG_LEXICAL_BLOCK = 0, 1, 2, 3
DEBUG_LOC, DEBUG_SUBPROGRAM, DEBUG_CALL_SITE = 4, 5, 6

# Function flags.
FUNCTION_FLAG_PRIVATE = 0x01
FUNCTION_FLAG_KERNEL = 0x02
FUNCTION_FLAG_HINTS = 0x04

# DISubprogram flag bits a reader knows (NVIDIA's knows only bit 0 as well).
DISUBPROGRAM_KNOWN_FLAGS = 0x01
