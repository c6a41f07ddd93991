"""The optional compiled helpers (tilebc/_speedups.c), or None where they are not built.

The package installs and works without a C compiler: every caller keeps its pure-Python path and
uses a helper only when it is here. TILEBC_PURE=1 in the environment forces the pure path (the
tests run both ways).
"""
from __future__ import annotations

import os

scan_token = None
Token = None  # the lexer's token type
CursorBase = None  # the token-level methods of the lexer's Cursor
OpDecoder = None  # one op kind's decoder, made from its plan (tilebc/binary/fastpath.py)
DECODER_KINDS = 0  # how many attribute kinds its programs may name (an older build knows fewer)
PRINT_PROGRAMS = 0  # 1: print_ops runs the kinds' body programs, 2: with optional groups, 3: with
#                     the attribute texts kept by the print (an older build runs fewer or none)
PLAIN_SUBPROGRAMS = 0  # 1: plain_locations makes the subprograms scoping locations too
decode_ops = None  # the reader's loop over a body's or a block's ops
plain_locations = None  # a function's op locations from plain debug entries (Reader.op_locations)
store_locations = None  # PendingLocations.materialise's loop over the ops
new_values = None  # a block's arguments made in C (the reader's entries and regions)
number_ops = None  # the printer's SSA naming of a block's ops (text/names.py)
print_ops = None  # the printer's loop over a block's ops (text/printer.py block_body)
visit_locations = None  # the -g printer's walk collecting location aliases
alias_visit = None  # LocationAliases._visit (text/debuginfo.py)
alias_visit_all = None  # LocationAliases.visit_distinct: _visit of each of a list of locations
alias_definitions_text = None  # LocationAliases.definitions_text: the aliases' definitions
verify_ops = None  # the verifier's loop over a block's ops (verify/structure.py Verifier.block)
encode_ops = None  # the bytecode writer's loop over a block's ops (binary/writer.py ModuleWriter.ops)
parse_ops = None  # the text parser's loop over a region's ops (text/parser.py _Parser._block_ops)
parse_args = None  # the text parser's loop over an entry's arguments (text/parser.py _Parser._entry)
keep_hash = None  # hashing by a kept `_hash` without a Python frame (ir/shared.py cached_hash)
FieldsSlot = None  # DecodedOp's operands and attrs: the C decoder's compact fields (lazyloc.py)
populate_arenas = None  # the allocator's arenas populated as they are mapped (one-shot commands)
fill_marks = None  # the -g parent's marks replaced by the child's location texts (alias_aside.py)

if not os.environ.get("TILEBC_PURE"):
    try:
        import tilebc._speedups as _speedups  # not `from . import`: that reads as the package
    except ImportError:  # not built (no compiler when installed): the pure path
        _speedups = None
    # each name on its own: an extension built before a helper existed still serves the others
    DECODER_KINDS = getattr(_speedups, "DECODER_KINDS", 10)
    PRINT_PROGRAMS = getattr(_speedups, "PRINT_PROGRAMS", 0)
    PLAIN_SUBPROGRAMS = getattr(_speedups, "PLAIN_SUBPROGRAMS", 0)
    for _name in ("scan_token", "Token", "CursorBase", "OpDecoder", "decode_ops",
                  "plain_locations", "store_locations", "new_values", "number_ops", "print_ops",
                  "visit_locations", "verify_ops", "alias_visit", "alias_visit_all",
                  "alias_definitions_text", "encode_ops", "parse_ops", "parse_args", "keep_hash",
                  "FieldsSlot", "populate_arenas", "fill_marks"):
        globals()[_name] = getattr(_speedups, _name, None)

ACTIVE = scan_token is not None
