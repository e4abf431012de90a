# Shared set-up for the scripts: a virtual environment (.venv, or $JTCSE_VENV) with the CPU build of torch
# pinned *before* the package, so pip never pulls the multi-GB CUDA wheels.
# Usage: source scripts/_env.sh [extras]     (extras e.g. "dev")
# JTCSE_VENV names the virtualenv (default .venv); JTCSE_BASE_VENV, when set, layers a new one on that installed one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
VENV=${JTCSE_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  if [ -n "${JTCSE_BASE_VENV:-}" ]; then
    # Layered on an installed virtualenv (.ci/run: .venv-openvino on .venv): its site-packages come after this
    # one's on sys.path, so pip installs here only what differs (optimum-intel, openvino, transformers <5.6, ...)
    # and reuses the rest (torch and most dependencies) instead of unpacking them a second time.
    base=$(cd "$JTCSE_BASE_VENV" && pwd)/$(cd "$JTCSE_BASE_VENV" && echo lib/python3*/site-packages)
    own=$(echo "$VENV"/lib/python3*/site-packages)
    if [ -d "$base" ] && [ -d "$own" ]; then
      echo "$base" > "$own/_jtcse_base_venv.pth"
    fi
  fi
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# --no-compile: pip would byte-compile every file it installs (all of torch, transformers, scipy, ...: about 50 CPU-s
# here); Python compiles just the modules a process imports, once, on first use (about 12 CPU-s for the test suite),
# and keeps them: so the scripts write bytecode even where the environment says not to.
unset PYTHONDONTWRITEBYTECODE
python -m pip install -q --no-compile --upgrade pip
TORCH="torch==${JTCSE_TORCH_VERSION:-2.13.0}"
python -m pip install -q --no-compile "$TORCH"
# torch is named again so that no dependency upgrades it: e.g. optimum-intel wants torchvision, whose latest
# release needs a newer torch, and pip would fetch that torch's CUDA build rather than pick a matching torchvision.
if [ -n "${1:-}" ]; then
  python -m pip install -q --no-compile -e ".[$1]" "$TORCH"
else
  python -m pip install -q --no-compile -e . "$TORCH"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
