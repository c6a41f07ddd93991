#!/usr/bin/env bash
# Create .venv and install tilebc (test extra: NVIDIA oracles) and tilebc-runtime. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" -e ./runtime
