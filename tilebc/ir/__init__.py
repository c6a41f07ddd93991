"""IR model: types, attributes, locations and the module structure."""
from .attrs import *  # noqa: F401,F403
from .location import *  # noqa: F401,F403
from .module import Block, Function, Global, Module, Op, ParsedOp, Region, Value  # noqa: F401
from .types import *  # noqa: F401,F403
