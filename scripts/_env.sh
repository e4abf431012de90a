# Shared set-up for the scripts: a virtual environment (.venv, or $JTCSE_VENV) with the CPU build of torch
# pinned *before* the package, so pip never pulls the multi-GB CUDA wheels.
# Usage: source scripts/_env.sh [extras]     (extras e.g. "dev")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
VENV=${JTCSE_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
TORCH="torch==${JTCSE_TORCH_VERSION:-2.13.0}"
python -m pip install -q "$TORCH"
# torch is named again so that no dependency upgrades it: e.g. optimum-intel wants torchvision, whose latest
# release needs a newer torch, and pip would fetch that torch's CUDA build rather than pick a matching torchvision.
if [ -n "${1:-}" ]; then
  python -m pip install -q -e ".[$1]" "$TORCH"
else
  python -m pip install -q -e . "$TORCH"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
