"""Generated code compiled once and loaded from disk after (tilebc/codecache.py)."""
import builtins
import os

from tilebc import codecache


def _run(code):
    namespace = {}
    exec(code, namespace)
    return namespace["f"](20)


def test_second_process_loads_instead_of_compiling(tmp_path, monkeypatch):
    monkeypatch.setattr(codecache, "_DIRECTORY", str(tmp_path))
    monkeypatch.setattr(codecache, "_usable", None)
    source = "def f(x):\n    return x * 2 + 1\n"
    assert _run(codecache.compile_generated(source, "<test f>")) == 41
    assert len(os.listdir(tmp_path)) == 1

    def refuse(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(builtins, "compile", refuse)
    code = codecache.compile_generated(source, "<test f>")
    assert _run(code) == 41 and code.co_filename == "<test f>"


def test_changed_source_or_damaged_entry_compiles_again(tmp_path, monkeypatch):
    monkeypatch.setattr(codecache, "_DIRECTORY", str(tmp_path))
    monkeypatch.setattr(codecache, "_usable", None)
    codecache.compile_generated("def f(x):\n    return x\n", "<test f>")
    assert _run(codecache.compile_generated("def f(x):\n    return -x\n", "<test f>")) == -20
    assert len(os.listdir(tmp_path)) == 2
    for name in os.listdir(tmp_path):
        (tmp_path / name).write_bytes(b"\x00not marshal")
    assert _run(codecache.compile_generated("def f(x):\n    return -x\n", "<test f>")) == -20


def test_unwritable_directory_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(codecache, "_DIRECTORY", str(blocker / "sub"))
    monkeypatch.setattr(codecache, "_usable", None)
    assert _run(codecache.compile_generated("def f(x):\n    return x + 2\n", "<test f>")) == 22
    assert codecache._usable is False
