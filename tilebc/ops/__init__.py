"""The declarative op table and the enums it uses."""
from .enums import *  # noqa: F401,F403
from .spec import (Arity, AttrKind, AttrSpec, Effects, Elements, Family, FlagBit,  # noqa: F401
                   OperandSpec, OpSpec, ResultSpec)
from .table import (BODY_OPS, MNEMONIC_ALIASES, OPS, OPS_BY_MNEMONIC, OPS_BY_OPCODE,  # noqa: F401
                    PUBLIC_OPS, max_public_opcode)
