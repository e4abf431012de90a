# Shared set-up for the scripts: a virtual environment in .venv with the CPU build of torch
# pinned *before* the package, so pip never pulls the multi-GB CUDA wheels.
# Usage: source scripts/_env.sh [extras]     (extras e.g. "dev")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==${JTCSE_TORCH_VERSION:-2.13.0}"
if [ -n "${1:-}" ]; then
  python -m pip install -q -e ".[$1]"
else
  python -m pip install -q -e .
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
