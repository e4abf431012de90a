"""A twin checkpoint carries its own modeling code: it opens where jtcse is not importable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.cli import run_python

from jtcse import build_twin
from jtcse.modeling.loading import load_model

SENTENCES = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "Short."]
CODE_FILES = {"twin.py", "cross_attention.py", "portable.py"}


@pytest.fixture(scope="module")
def saved_twin(tmp_path_factory, tiny_bert, tiny_bert_b):
    model = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=48)
    path = tmp_path_factory.mktemp("twin") / "twin"
    model.save(str(path))
    return model, path


def test_checkpoint_names_its_own_files_byte_identical_to_the_package(saved_twin):
    import jtcse.modeling

    _, path = saved_twin
    modules = json.loads((path / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["twin.TwinTowers"]
    package = Path(jtcse.modeling.__file__).parent
    assert CODE_FILES <= {p.name for p in path.glob("*.py")}
    for name in CODE_FILES:
        assert (path / name).read_bytes() == (package / name).read_bytes()


@pytest.fixture(scope="module")
def without_jtcse(saved_twin, tmp_path_factory) -> dict:
    """One fresh interpreter that cannot import jtcse, for two tests (each fresh interpreter costs seconds of
    imports): it first opens the twin with plain sentence-transformers *without* ``trust_remote_code`` (the error,
    as ``refused``), then with it: checks its settings, saves its vectors to ``vectors`` and re-saves it to
    ``resaved`` (``module``: the module its class came from)."""
    _, path = saved_twin
    folder = tmp_path_factory.mktemp("without_jtcse")
    code = f"""
import json
import numpy as np
from sentence_transformers import SentenceTransformer
try:
    SentenceTransformer({str(path)!r})
    refused = None
except Exception as err:
    refused = f"{{type(err).__name__}}: {{err}}"
model = SentenceTransformer({str(path)!r}, trust_remote_code=True)
assert model[0].cael_every == 2 and model.max_seq_length == 48
np.save({str(folder / "emb.npy")!r}, model.encode({SENTENCES!r}))
model.save({str(folder / "resaved")!r})
print(json.dumps({{"refused": refused, "module": type(model[0]).__module__}}))
"""
    result = run_python(code, hide_jtcse=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "vectors": folder / "emb.npy",
            "resaved": folder / "resaved"}  # fmt: skip


@pytest.mark.slow
@pytest.mark.xdist_group("portable_twin_without_jtcse")
def test_fresh_process_without_jtcse_encodes_like_memory(saved_twin, without_jtcse):
    model, path = saved_twin
    assert without_jtcse["module"] == "twin"
    np.testing.assert_allclose(np.load(without_jtcse["vectors"]), model.encode(SENTENCES), atol=1e-5)
    # a twin re-saved without jtcse is the same portable checkpoint
    resaved = without_jtcse["resaved"]
    assert json.loads((resaved / "modules.json").read_text())[0]["type"] == "twin.TwinTowers"
    for name in CODE_FILES:
        assert (resaved / name).read_bytes() == (path / name).read_bytes()


def test_load_model_gives_the_installed_class(saved_twin):
    from jtcse.modeling.twin import TwinTowers

    model, path = saved_twin
    loaded = load_model(path)
    assert type(loaded[0]) is TwinTowers
    np.testing.assert_allclose(loaded.encode(SENTENCES), model.encode(SENTENCES), atol=1e-5)


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_old_type_checkpoint_still_loads(saved_twin, tmp_path):
    model, path = saved_twin
    old = _copy(path, tmp_path / "old")
    for name in CODE_FILES:
        (old / name).unlink()
    modules = json.loads((old / "modules.json").read_text())
    modules[0]["type"] = "jtcse.modeling.twin.TwinTowers"
    (old / "modules.json").write_text(json.dumps(modules))
    np.testing.assert_allclose(load_model(old).encode(SENTENCES), model.encode(SENTENCES), atol=1e-5)


@pytest.mark.parametrize("change", ["edit", "remove"])
def test_checkpoint_with_other_code_opens_with_the_installed_classes(saved_twin, tmp_path, change, caplog, capfd):
    """A twin written by another jtcse version (its code copy differs) or without the copy still opens in
    every jtcse command, with the installed classes: the checkpoint's own code is never run."""
    from jtcse.modeling.twin import TwinTowers

    model, path = saved_twin
    other = _copy(path, tmp_path / "other")
    target = other / "cross_attention.py"
    if change == "edit":
        target.write_text(target.read_text() + "\nprint('checkpoint code ran')\n")
    else:
        target.unlink()
    word = "differs from the installed" if change == "edit" else "is missing"
    with caplog.at_level("WARNING", logger="jtcse.modeling.checkpoint_code"):
        loaded = load_model(other)
    assert type(loaded[0]) is TwinTowers
    assert any(
        f"cross_attention.py {word}" in r.getMessage() and "installed jtcse classes" in r.getMessage()
        for r in caplog.records
    )
    assert "checkpoint code ran" not in capfd.readouterr().out
    np.testing.assert_allclose(loaded.encode(SENTENCES), model.encode(SENTENCES), atol=1e-5)


@pytest.mark.slow
@pytest.mark.xdist_group("portable_twin_without_jtcse")
def test_plain_sentence_transformer_without_trust_is_refused(without_jtcse):
    """Asked first, in the fresh interpreter (:func:`without_jtcse`)."""
    assert without_jtcse["refused"] is not None
    assert "twin.TwinTowers" in without_jtcse["refused"] and "trust_remote_code=True" in without_jtcse["refused"]


def test_exported_towers_stay_plain(saved_twin, tmp_path):
    model, _ = saved_twin
    for tower in model[0].export_towers(tmp_path / "export"):
        types = [m["type"] for m in json.loads((Path(tower) / "modules.json").read_text())]
        assert all(t.startswith("sentence_transformers.") for t in types), types
        assert not list(Path(tower).glob("*.py"))
