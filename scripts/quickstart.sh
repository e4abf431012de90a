#!/usr/bin/env bash
# Install jtcse into .venv and run the main job offline on the embedded defaults:
# a JTCSE twin of two MiniLM towers trained on stdlib prose, saved to runs/quickstart,
# then loaded back and used to encode (SentenceTransformer(path, trust_remote_code=True) works too;
# sentence-transformers >= 6 asks for that flag for any module class outside its own package).
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
# CPU-sized settings (a few minutes on 2 cores); later options override these, e.g. --max-steps 200.
jtcse train -o runs/quickstart --batch-size 32 --max-seq-length 32 --max-steps 30 --eval-steps 30 "$@"
python - <<'PY'
from jtcse.modeling.loading import load_model
model = load_model("runs/quickstart")
emb = model.encode(["A twin-tower sentence encoder.", "Two towers, one embedding."])
print("loaded runs/quickstart; embeddings:", emb.shape)
PY
