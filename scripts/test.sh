#!/usr/bin/env bash
# Run the test suite (pytest.ini: tests/, strict markers); arguments go to pytest.
#   bash scripts/test.sh                 everything
#   bash scripts/test.sh -m "not slow"   the fast subset (maths, readers, errors; no training, no torch subprocesses)
# Installs jtcse with its test extras into .venv first, unless .venv already holds an install newer than setup.py.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
installed=(.venv/lib/python3*/site-packages/jtcse-*.dist-info)
if [ -x .venv/bin/python ] && [ -d "${installed[0]}" ] && [ ! setup.py -nt "${installed[0]}" ] \
    && .venv/bin/python -c "import pytest" 2>/dev/null; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
else
  source scripts/_env.sh dev
fi
# The test towers are tiny: one BLAS thread per process is as fast and does not fight over shared cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
python -m pytest -q "$@"
