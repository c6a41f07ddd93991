"""tilebc/ir/builder.pyi must be what scripts/gen_builder_stub.py generates from the op table, and
name exactly the methods a Builder answers to."""
import ast
import keyword
import importlib.util
from pathlib import Path

import pytest

from tilebc.ir import Module
from tilebc.ir.builder import Builder, new_function
from tilebc.ops.table import OPS

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "tilebc" / "ir" / "builder.pyi"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_builder_stub",
                                                  ROOT / "scripts" / "gen_builder_stub.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stub_is_current(generator):
    assert generator.render() == STUB.read_text(encoding="utf-8"), (
        "tilebc/ir/builder.pyi is stale: run `python scripts/gen_builder_stub.py` and commit it")


def test_check_mode_reports_a_stale_stub(generator, tmp_path, capsys):
    stale = tmp_path / "builder.pyi"
    stale.write_text(STUB.read_text(encoding="utf-8").replace("def addf(", "def addff(", 1),
                     encoding="utf-8")
    assert generator.main(["--check", "--path", str(stale)]) == 1
    assert "addff" in capsys.readouterr().out
    assert generator.main(["--check", "--path", str(STUB)]) == 0


def _stub_methods():
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Builder")
    return {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}


def test_stub_names_every_op_method_the_builder_answers_to():
    methods = _stub_methods()
    b = new_function(Module(), "k", [])
    for name in methods:
        if name != "__init__":
            assert callable(getattr(b, name)) or name == "args", name
    for spec in OPS:
        if spec.structural or not spec.mnemonic.isidentifier():
            continue
        name = spec.mnemonic + "_" if keyword.iskeyword(spec.mnemonic) else spec.mnemonic
        assert name in methods, f"op {spec.mnemonic} has no method in builder.pyi"


def test_stub_operands_and_attributes_are_the_tables():
    """Each generated method takes the op's operand groups positionally and its attributes as
    keywords, under the names the builder accepts at run time."""
    methods = _stub_methods()
    hand_written = {name for name, fn in vars(Builder).items() if callable(fn)}
    for spec in OPS:
        name = spec.mnemonic + "_" if keyword.iskeyword(spec.mnemonic) else spec.mnemonic
        if spec.structural or name in hand_written or name not in methods:
            continue
        args = methods[name].args
        assert [a.arg for a in args.args[1:]] == [o.name for o in spec.operands], name
        keywords = [a.arg for a in args.kwonlyargs][3:]
        assert keywords == [a.name for a in spec.attrs if not keyword.iskeyword(a.name)], name
