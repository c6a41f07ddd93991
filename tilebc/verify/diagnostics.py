"""What the verifier reports: one Diagnostic per problem, with the place it was found."""
from __future__ import annotations


from ..errors import Location, VerificationError
from ..ops.table import MODULE_OP
from ..record import Record  # not dataclasses: start-up time

ERROR = "error"
WARNING = "warning"  # accepted by NVIDIA's tileiras, but outside what the spec allows


class Diagnostic(Record):
    _fields = ("rule", "op", "message", "location", "severity")

    # rule: a stable rule id, e.g. "ssa.dominance"; op: the op mnemonic, or "entry" / "global" /
    # "module"; message: lower-case, says what was expected
    def __init__(self, rule: str, op: str, message: str, location: Location = Location(),
                 severity: str = ERROR):
        for name, value in zip(self._fields, (rule, op, message, location, severity)):
            object.__setattr__(self, name, value)

    # the location's parts, read as the error's are
    file = property(lambda self: self.location.file)
    offset = property(lambda self: self.location.offset)
    line = property(lambda self: self.location.line)
    column = property(lambda self: self.location.column)

    def where(self) -> str:
        return str(self.location)

    def to_error(self) -> VerificationError:
        error = VerificationError(f"{self.op}: {self.message}", location=self.location)
        error.rule = self.rule
        error.diagnostic = self
        return error

    def __str__(self) -> str:
        return f"{self.to_error()} [{self.rule}]"


class StopChecking(Exception):
    """Raised by the collector in fail-fast mode once the first error is recorded."""


class Collector:
    """Collects diagnostics while the verifier walks a module."""

    def __init__(self, file: str | None, fail_fast: bool):
        self.file = file
        self.fail_fast = fail_fast
        self.diagnostics: list[Diagnostic] = []

    def report(self, rule: str, node, message: str, severity: str = ERROR) -> bool:
        """Record a problem at `node` (an Op, Function, Global, or None for the module). Returns
        False, so a check can `return ctx.report(...)` to stop checking the op it looks at."""
        diagnostic = Diagnostic(rule, node_name(node), message, Location.of(node, self.file),
                                severity)
        self.diagnostics.append(diagnostic)
        if self.fail_fast and severity == ERROR:
            raise StopChecking()
        return False


def node_name(node) -> str:
    spec = getattr(node, "spec", None)
    if spec is not None:
        return spec.mnemonic
    if node is None:
        return MODULE_OP.mnemonic
    if hasattr(node, "body"):
        return f"entry @{node.name}"
    return f"global @{node.name}"
