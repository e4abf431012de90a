#!/usr/bin/env bash
# Install jtcse into .venv and run the main job offline on the embedded defaults:
# a JTCSE twin of two MiniLM towers trained on stdlib prose, saved to runs/quickstart,
# then loaded back with plain SentenceTransformer(...).encode.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
jtcse train --output-dir runs/quickstart "$@"
python - <<'PY'
from sentence_transformers import SentenceTransformer
model = SentenceTransformer("runs/quickstart")
emb = model.encode(["A twin-tower sentence encoder.", "Two towers, one embedding."])
print("loaded runs/quickstart; embeddings:", emb.shape)
PY
