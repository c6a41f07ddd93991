import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = ROOT / "fixtures" / "bytecode"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def fixture_files():
    """Every stored cuTile fixture file (fails loudly if there are none)."""
    files = sorted(FIXTURE_DIR.glob("*/*.tilebc"))
    if not files:
        raise RuntimeError(f"no fixtures under {FIXTURE_DIR}")
    return files


def fixture_id(path: Path) -> str:
    return path.stem


@pytest.fixture(scope="session")
def all_fixture_files():
    return fixture_files()
