import gc
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = ROOT / "fixtures" / "bytecode"
# The team's shared folder (seeds, NVIDIA reference files, tools) sits beside the repository.
SHARED = Path(os.environ.get("TILEBC_SHARED", ROOT.parent / "shared"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def fixture_files():
    """Every stored cuTile fixture file (fails loudly if there are none)."""
    files = sorted(FIXTURE_DIR.glob("*/*.tilebc"))
    if not files:
        raise RuntimeError(f"no fixtures under {FIXTURE_DIR}")
    return files


def shared_path(relative: str) -> Path:
    """A path inside the shared folder. A checkout without the folder skips the test (and says
    where it looked); a shared folder that lacks the path is an error, never a silent skip."""
    if not SHARED.is_dir():
        pytest.skip(f"no shared folder at {SHARED} (set TILEBC_SHARED to use another)")
    path = SHARED / relative
    if not path.exists():
        pytest.fail(f"{path} is missing from the shared folder {SHARED}")
    return path


@pytest.fixture
def frozen_heap():
    """Keep the garbage collector off the objects that exist before the test: in a full-suite
    process a collection walks hundreds of MB of earlier tests' objects and would be charged to
    whichever input a per-input CPU limit happened to be timing."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def fixture_id(path: Path) -> str:
    return path.stem


@pytest.fixture(scope="session")
def all_fixture_files():
    return fixture_files()
