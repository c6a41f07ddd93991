"""Test files with their expected diagnostics in comments, in the form MLIR's and NVIDIA's lit tests
use with -verify-diagnostics:

    // expected-error@+1 {{message text}}      the diagnostic is on the next line
    // expected-warning {{message text}}       ... on this line (@-N, @+N: N lines up or down)
    // -----                                   starts the next independent case

A case passes when every diagnostic the verifier reports is expected, at that line, with the
expected text somewhere in its message, and every expectation is met.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Tuple

SPLIT = re.compile(r"^// -----\s*$", re.M)
EXPECTED = re.compile(r"//\s*expected-(error|warning|note)(?:@([+-]\d+))?\s*\{\{(.*?)\}\}")


@dataclass(frozen=True)
class Expected:
    severity: str
    line: int       # 1-based, in the whole file
    text: str
    written_at: int  # the comment's own line


def split_cases(text: str) -> List[Tuple[int, str]]:
    """(first line, text padded with blank lines so line numbers are the file's) per case."""
    cases, start, line = [], 0, 1
    for match in SPLIT.finditer(text + "\n"):
        chunk = text[start:match.start()]
        cases.append((line, "\n" * (line - 1) + chunk))
        line += chunk.count("\n") + 1
        start = match.end() + 1
    chunk = text[start:]
    if chunk.strip():
        cases.append((line, "\n" * (line - 1) + chunk))
    return cases


def expectations(case: str) -> List[Expected]:
    found = []
    for number, line in enumerate(case.splitlines(), 1):
        for match in EXPECTED.finditer(line):
            offset = int(match.group(2) or 0)
            found.append(Expected(match.group(1), number + offset, match.group(3), number))
    return found


def mismatches(expected: List[Expected], reported) -> List[str]:
    """What differs between the expectations and the reported diagnostics (objects with
    .severity, .line and .message); empty when they agree."""
    problems, unmatched = [], list(reported)
    for want in expected:
        hit = next((d for d in unmatched if d.severity == want.severity and d.line == want.line
                    and want.text in d.message), None)
        if hit is None:
            problems.append(f"line {want.written_at}: expected {want.severity} on line {want.line} "
                            f"{{{{{want.text}}}}} was not reported")
        else:
            unmatched.remove(hit)
    for diagnostic in unmatched:
        problems.append(f"line {diagnostic.line}: unexpected {diagnostic.severity}: "
                        f"{diagnostic.message} [{getattr(diagnostic, 'rule', '')}]")
    return problems
