#!/usr/bin/env bash
# Run the test suite (pytest.ini: tests/, strict markers); arguments go to pytest.
#   bash scripts/test.sh                 everything, in parallel (pytest-xdist: -n auto --dist loadgroup)
#   bash scripts/test.sh -m "not slow"   the fast subset (maths, readers, errors; no training, no torch subprocesses)
#   bash scripts/test.sh -n 0            one process (or -p no:xdist); a later -n overrides the default
#   bash scripts/test.sh --export        the real OpenVINO conversions (marker export) in their own virtualenv,
#                                        .venv-openvino (jtcse[openvino-tests]: optimum-intel caps transformers <5.6)
# Installs jtcse with its test extras into the virtualenv first, unless it already holds an install newer than setup.py.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=.venv
extras=dev
if [ "${1:-}" = "--export" ]; then
  shift
  venv=.venv-openvino
  extras=openvino-tests
  set -- -m export tests/test_export.py "$@"
fi
installed=("$venv"/lib/python3*/site-packages/jtcse-*.dist-info)
if [ -x "$venv/bin/python" ] && [ -d "${installed[0]}" ] && [ ! setup.py -nt "${installed[0]}" ] \
    && "$venv/bin/python" -c "import pytest" 2>/dev/null; then
  # shellcheck disable=SC1091
  . "$venv/bin/activate"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
else
  JTCSE_VENV=$venv source scripts/_env.sh "$extras"
  if [ "$extras" = openvino-tests ]; then
    # optimum-intel requires torchvision, which it imports for vision models only. PyPI's torchvision wheels are
    # CUDA builds: beside the CPU torch they break `import transformers` (torchvision::nms does not exist), so the
    # text-only export tests run without it (with network access to PyTorch's index, its CPU build works too).
    python -m pip uninstall -q -y torchvision
  fi
fi
# Cache compiled bytecode (__pycache__, git-ignored) even where the environment says not to: otherwise every
# worker and child process compiles jtcse and pytest rewrites and compiles every test module again, on each run
# (1.5 s of the fast subset's 19).
unset PYTHONDONTWRITEBYTECODE
# The test towers are tiny: one BLAS thread per process is as fast and does not fight over shared cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# In parallel by default: one worker per core; tests sharing a port or folder carry @pytest.mark.xdist_group.
parallel=(-n auto --dist loadgroup)
for arg in "$@"; do
  case "$arg" in no:xdist | -pno:xdist) parallel=() ;; esac
done
if [ ${#parallel[@]} -gt 0 ] && ! python -c "import xdist" 2>/dev/null; then
  parallel=()  # .venv-openvino (jtcse[openvino-tests]) has no pytest-xdist: its few export tests run serially
fi
python -m pytest -q "${parallel[@]}" "$@"
