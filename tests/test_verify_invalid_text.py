"""Invalid IR written as text, each case beside the diagnostics it must draw (tests/verify_invalid/,
lit's expected-error comments; read by tests/expected_diagnostics.py): the verifier reports
exactly those, at those lines, and nothing else."""
from pathlib import Path

import pytest

import tilebc
from tilebc.text import parse_module
from tilebc.verify import diagnostics, verify

from expected_diagnostics import Expected, expectations, mismatches, split_cases

FOLDER = Path(__file__).parent / "verify_invalid"
CASES = [(path, line, case) for path in sorted(FOLDER.glob("*.mlir"))
         for line, case in split_cases(path.read_text())]


@pytest.mark.parametrize("path, line, case", CASES, ids=[f"{p.stem}:{n}" for p, n, _ in CASES])
def test_invalid_text_draws_the_expected_diagnostics(path, line, case):
    expected = expectations(case)
    assert expected, f"{path.name}:{line}: a case without expectations checks nothing"
    module = parse_module(case, str(path))
    reported = diagnostics(module)
    assert mismatches(expected, reported) == []
    assert diagnostics(module, full=True) == reported  # the fast path finds the same
    assert all(d.file == str(path) for d in reported)
    errors = [d for d in reported if d.severity == "error"]
    if errors:
        with pytest.raises(tilebc.VerificationError) as raised:
            verify(module)
        assert str(raised.value).startswith(f"{path}:{errors[0].line}:")


def test_every_folder_file_has_cases():
    files = sorted(FOLDER.glob("*.mlir"))
    assert files and {p for p, _, _ in CASES} == set(files)


class _Reported:
    def __init__(self, severity, line, message):
        self.severity, self.line, self.message = severity, line, message


def test_the_reader_reports_what_does_not_match():
    """The checker fails a case on a missed expectation, a wrong line and an unexpected diagnostic."""
    text = "a\n// expected-error@+1 {{must widen}}\nb\n// -----\nc // expected-warning {{odd}}\n"
    (first, one), (second, two) = split_cases(text)
    assert (first, second) == (1, 5)
    assert expectations(one) == [Expected("error", 3, "must widen", 2)]
    assert expectations(two) == [Expected("warning", 5, "odd", 5)]
    assert mismatches(expectations(one), [_Reported("error", 3, "exti must widen: i32")]) == []
    assert mismatches(expectations(one), [_Reported("error", 4, "exti must widen: i32")]) == [
        "line 2: expected error on line 3 {{must widen}} was not reported",
        "line 4: unexpected error: exti must widen: i32 []"]
    assert mismatches(expectations(one), [_Reported("warning", 3, "must widen")])[0].startswith(
        "line 2: expected error")
