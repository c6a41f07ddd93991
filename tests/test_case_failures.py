"""The fixture walks' CaseFailures: every case runs, and the test fails naming each failing one."""
import pytest

from conftest import CaseFailures


def test_every_failing_case_is_named_after_all_cases_ran():
    failures, ran = CaseFailures(), []
    for label, value in [("a-13.1", 1), ("a-13.2", 2), ("a-13.3", 3)]:
        with failures.case(label):
            ran.append(label)
            assert value != 2, "two"
            if value == 3:
                raise ValueError("three")
    assert ran == ["a-13.1", "a-13.2", "a-13.3"]
    with pytest.raises(pytest.fail.Exception) as raised:
        failures.raise_any()
    message = str(raised.value)
    assert message.startswith("2 of 3 cases failed: a-13.2, a-13.3")
    assert "a-13.2: test_case_failures.py:" in message and "two" in message
    assert "ValueError: three" in message


def test_a_skip_inside_a_case_does_not_hide_earlier_failures():
    failures = CaseFailures()
    with failures.case("a-13.1"):
        assert False, "broken"
    with pytest.raises(pytest.fail.Exception, match="1 of 2 cases failed: a-13.1"):
        with failures.case("a-13.2"):
            pytest.skip("no tool")


def test_no_failure_raises_nothing():
    failures = CaseFailures()
    with failures.case("a-13.1"):
        pass
    failures.raise_any()
