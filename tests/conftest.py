"""Shared fixtures: offline hub, tiny random BERT/RoBERTa towers with real tokenizers, the local https
stand-in for Google Translate (``stub``; tests using it are marked ``network_stub`` automatically), and
``one_thread``. Test helpers (not fixtures) live in ``tests/helpers/``."""

from __future__ import annotations

import gc
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

import pytest
from helpers.shared import built_once, run_root
from helpers.sts import write_stsb

# Collecting imports torch, transformers and sentence-transformers: millions of long-lived objects. The cyclic
# garbage collector would walk that growing heap again and again while it is built (about 1 s per process), and
# once more at interpreter exit (another second), so it is off until the tests start, and what collection
# imported is then frozen (gc.freeze: kept out of every later collection).
gc.disable()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session) -> None:
    gc.freeze()
    gc.enable()


def pytest_unconfigure(config) -> None:
    gc.freeze()


SHARED = Path(__file__).resolve().parents[1].parent / "shared"
SHARED_DATA = SHARED / "data"


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory) -> Path:
    """This run's folder for artefacts built once and shared by every xdist worker (:mod:`helpers.shared`)."""
    return run_root(tmp_path_factory)


def _tiny_tower(root: Path, name: str, arch: str, **options) -> str:
    from jtcse.testing import make_tiny_tower

    return str(built_once(root, name, lambda folder: make_tiny_tower(folder / name, arch, **options)) / name)


@pytest.fixture(scope="session")
def tiny_bert(shared_root) -> str:
    """4-layer, hidden-32 random BERT tower (the embedded MiniLM's WordPiece cut to 8k words: jtcse.testing)."""
    return _tiny_tower(shared_root, "bert_a", "bert", seed=0)


@pytest.fixture(scope="session")
def tiny_bert_b(shared_root) -> str:
    """A second tiny BERT tower, same shape and tokenizer, other weights."""
    return _tiny_tower(shared_root, "bert_b", "bert", seed=1)


@pytest.fixture(scope="session")
def tiny_roberta(shared_root) -> str:
    """4-layer, hidden-32 random RoBERTa tower (byte-level BPE trained on stdlib prose)."""
    return _tiny_tower(shared_root, "roberta_a", "roberta", seed=0)


@pytest.fixture(scope="session")
def tiny_roberta_b(shared_root) -> str:
    return _tiny_tower(shared_root, "roberta_b", "roberta", seed=1)


@pytest.fixture(scope="session")
def twin_dir(shared_root, tiny_bert, tiny_bert_b) -> str:
    """A saved, untrained twin of ``tiny_bert`` and ``tiny_bert_b`` (CAEL every 2 layers, 32 tokens), built once per
    run; read-only (copy it to change it). Tests whose subject is building or saving a twin build their own."""

    def build(folder: Path) -> None:
        from jtcse.modeling.build import build_twin

        build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=32, device="cpu").save(str(folder / "twin"))

    return str(built_once(shared_root, "twin", build) / "twin")


@pytest.fixture(scope="session")
def minilm_path() -> str:
    from jtcse.defaults import default_tower_path

    return default_tower_path()


@pytest.fixture(scope="session")
def dev_file(tmp_path_factory) -> Path:
    """A six-pair STS-B-format dev file (:mod:`helpers.sts`)."""
    return write_stsb(tmp_path_factory.mktemp("data") / "sts-dev.csv")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data when it is beside the checkout (CI and development); tests needing it skip otherwise."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def stub_cert(tmp_path_factory) -> tuple[str, str]:
    """A throw-away certificate/key pair for the stand-in server."""
    from jtcse.testing.translate_stub import make_self_signed_cert

    return make_self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def stub(stub_cert):
    """A fresh stand-in server per test (its request log is the test's), no added latency."""
    from jtcse.testing.translate_stub import StubTranslateServer

    with StubTranslateServer(*stub_cert) as server:
        yield server


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """In a run without slow tests (``-m "not slow"``) each module's tests go to one worker together
    (:class:`helpers.scheduling.ModuleScheduling`); otherwise, and for ``xdist_group`` tests, xdist's own choice."""
    if config.getvalue("dist") == "loadgroup" and "not slow" in (config.option.markexpr or ""):
        from helpers.scheduling import ModuleScheduling

        return ModuleScheduling(config, log)
    return None


_STUB_FIXTURES = {"stub", "stub_cert"}


def pytest_collection_modifyitems(config, items) -> None:
    """Tests that use the stand-in server are ``network_stub`` without saying so."""
    for item in items:
        if _STUB_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.network_stub)


@pytest.fixture
def one_thread():
    """Run the test with one torch thread (deterministic, and fair to a shared 2-core machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
