"""The results file every long fuzz pass writes (fuzz/results/*.md)."""
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

RESULTS = Path(__file__).resolve().parent / "results"


def publish(lines: List[str], listings: Sequence[Tuple[str, List[str]]], out: Path) -> str:
    """Append each non-empty listing (its first 20 items) to `lines`, write the report to `out`,
    print it, and return its text."""
    for title, items in listings:
        if items:
            lines += ["", f"## {title} (first 20)", "", "```"] + items[:20] + ["```"]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    print(f"written {out}", file=sys.stderr)
    return text
