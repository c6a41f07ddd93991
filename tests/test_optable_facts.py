"""The op table's typing facts (family, element class, result_like) hold on real kernels: the
builder's result-type inference, which reads them, gives the types NVIDIA's tools and the verifier
accepted, for every op the facts cover."""
import tilebc
from tilebc.ir.builder import infer_result_types
from tilebc.ops.spec import Family

from conftest import fixture_files
from handbuilt import KERNELS


def _covered(spec) -> bool:
    if spec.structural:
        return False
    return spec.family is not Family.OTHER or bool(
        spec.result_like and not any(r.variadic for r in spec.results))


def test_inferred_result_types_match_fixtures_and_handbuilt_kernels():
    modules = [tilebc.load(path) for path in fixture_files()[::12]]  # a spread over the fixtures
    modules += [build()[0] for build in KERNELS.values()]
    seen, wrong = set(), []
    for module in modules:
        for op in module.walk():
            if not _covered(op.spec):
                continue
            seen.add(op.spec.family)
            expected = [r.type for r in op.results]
            got = infer_result_types(op.name, op.operands, op.attrs)
            if got != expected:
                wrong.append(f"{op.name} in {module.source}: inferred {got}, the module has {expected}")
    assert not wrong, "\n".join(wrong[:20])
    assert seen >= {Family.ELEMENTWISE, Family.COMPARE, Family.OTHER}
