#!/usr/bin/env bash
# Create .venv and install tilebc (test extra: NVIDIA oracles) and tilebc-runtime. Idempotent.
# --tests: also make the C++ loader's test builds (tests/cpp_builds.py), on the core pip leaves idle.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tests=""
for arg in "$@"; do
  case "$arg" in
    --tests) tests=1 ;;
    *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
  esac
done
# Where $PYTHON's own pip can install into another environment (pip >= 22.3, --python), the venv is
# made without pip: ensurepip took 9 of the set-up's ~55 s. (Add pip to it later, if wanted, with
# `.venv/bin/python -m ensurepip`.) Otherwise the venv gets its own pip, which installs below.
if [ ! -x .venv/bin/python ]; then
  if "$PYTHON" -m pip --python "$PYTHON" --version >/dev/null 2>&1; then
    "$PYTHON" -m venv --without-pip .venv
  else
    "$PYTHON" -m venv .venv
  fi
fi
if .venv/bin/python -m pip --version >/dev/null 2>&1; then
  pip=(.venv/bin/python -m pip)
else
  pip=("$PYTHON" -m pip --python .venv/bin/python)
fi
# pip installs on one core. With --tests the C++ builds the tests use (~45 s of CPU: sanitizer and
# package builds) run on the other one meanwhile; they need cmake and cuda.h (nvidia-cuda-runtime,
# which the test extra pulls in anyway), installed first. A build that fails here is built again,
# and its error reported, by the tests.
builder=""
if [ -n "$tests" ] && "${pip[@]}" install -q --no-compile --disable-pip-version-check nvidia-cuda-runtime \
    "cmake>=3.20" ninja >/dev/null 2>&1; then
  # its own process group, so that a failed set-up stops the compilers too
  setsid .venv/bin/python tests/cpp_builds.py >/dev/null 2>&1 &
  builder=$!
  trap 'kill -- -"$builder" 2>/dev/null || true' EXIT
fi
# Editable in "compat" mode: a plain path entry in a .pth file. The default mode installs an import
# hook whose module (with pathlib and urllib.parse) every Python start in the venv imports: 15 ms
# of each `tilebc` command, test worker and CLI subprocess.
"${pip[@]}" install -q --no-compile --disable-pip-version-check --config-settings editable_mode=compat \
  -e ".[test]" -e ./runtime
# Bytecode caches, on every core (pip compiles what it installs on one: ~10 s), for the installed
# packages and the editable ones too, written even where PYTHONDONTWRITEBYTECODE is set (there every
# test worker and every CLI subprocess would compile them again from source).
site_packages=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
.venv/bin/python -m compileall -q -j 0 "$site_packages" tilebc runtime/tilebc_runtime fuzz >/dev/null
# Likewise the JIT's lowering hash, kept beside its sources (runtime/CACHE.md): otherwise the first
# `tilebc compile` writes it, and where PYTHONDONTWRITEBYTECODE is set every compile hashes them.
.venv/bin/python -c 'from tilebc_runtime.launch import record_hash_beside_sources as r; r()' \
  || echo "setup.sh: the lowering hash was not recorded; compiles will hash the sources" >&2

# The remote cache tier's tests start Debian's redis-server on loopback. Install it where apt-get
# can (as root, or through passwordless sudo); best effort and quiet: without it those tests skip.
if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  as_root=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then as_root="sudo -n"; else as_root="none"; fi
  fi
  if [ "$as_root" != none ]; then
    { $as_root apt-get update -qq && $as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends redis-server; } >/dev/null 2>&1 \
      || echo "setup.sh: could not install redis-server; the remote cache tests will be skipped" >&2
  fi
fi

if [ -n "$builder" ]; then
  wait "$builder" || true
  trap - EXIT
fi
