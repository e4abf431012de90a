"""``jtcse export``: every bad input is refused before anything is written, in one line; and, where
OpenVINO's Optimum backend is installed (the ``export`` marker; CI runs it in a second virtualenv, see
scripts/test.sh), real conversions of a tiny tower that load with sentence-transformers' backend.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from helpers.backends import installed, needs_openvino
from helpers.cli import invoke_cli, one_error_line, run_cli

from jtcse.backend_export import check_backend, export_model
from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError

SENTENCES = default_corpus_sentences(limit=12)  # calibration and comparison sentences (standard-library prose)


@pytest.fixture(scope="module")
def ensemble_dir(tmp_path_factory, tiny_bert, tiny_bert_b):
    from jtcse.modeling.build import build_ensemble

    path = tmp_path_factory.mktemp("ensemble") / "ens"
    build_ensemble([tiny_bert, tiny_bert_b], device="cpu").save(str(path))
    return path


@pytest.fixture()
def calibration(tmp_path):
    path = tmp_path / "calibration.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def _nothing_written(out) -> bool:
    """Neither the output, nor its temporary folder, nor its lock file is left behind."""
    return not any(out.parent.glob(out.name + "*"))


@pytest.mark.cli
@pytest.mark.slow
def test_cli_bad_inputs_are_one_line_and_write_nothing(tmp_path, tiny_bert, twin_dir, ensemble_dir, calibration):
    out = tmp_path / "out"
    not_model = tmp_path / "not_a_model"
    not_model.mkdir()
    (not_model / "notes.txt").write_text("hello")
    cases = {
        ("--format", "tflite"): "Unknown export format 'tflite'; valid ones: onnx, openvino.",
        ("--quantize", "int4"): "Unknown quantization 'int4'; valid ones: none, int8.",
        ("-f", "onnx", "-q", "int8", "--calibration", calibration): "--calibration applies to --format openvino "
        "--quantize int8 (static quantization); onnx int8 needs no calibration sentences.",
    }
    for args, message in cases.items():
        assert one_error_line(invoke_cli("export", tiny_bert, *args, "-o", out)) == f"Error: {message}"
    # Offline, OpenVINO int8 cannot fetch its default calibration set: say how to give one.
    line = one_error_line(invoke_cli("export", tiny_bert, "-f", "openvino", "-q", "int8", "-o", out))
    assert "HF_HUB_OFFLINE" in line and "--calibration FILE" in line
    line = one_error_line(
        invoke_cli("export", tiny_bert, "-q", "int8", "--calibration", tmp_path / "none.txt", "-o", out)
    )
    assert line == f"Error: Corpus file not found: {tmp_path / 'none.txt'}"
    line = one_error_line(invoke_cli("export", not_model, "-o", out))
    assert "is not a model folder (no modules.json or config.json)" in line
    line = one_error_line(invoke_cli("export", tmp_path / "missing", "-o", out))
    assert line == f"Error: Model folder not found: {tmp_path / 'missing'}"
    line = one_error_line(invoke_cli("export", twin_dir, "-o", out))
    assert (
        "is a twin; export takes single towers" in line and "export_towers" in line and "sum their embeddings" in line
    )
    line = one_error_line(invoke_cli("export", ensemble_dir, "-o", out))
    assert "is an ensemble; export takes single towers" in line and "member_1" in line
    assert _nothing_written(out)
    # A folder that no export made is never replaced, --overwrite or not.
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    for overwrite in ([], ["--overwrite"]):
        line = one_error_line(invoke_cli("export", tiny_bert, "-o", out, *overwrite))
        assert (
            f"{out / 'keep.txt'} was not written by jtcse export" in line and (out / "keep.txt").read_text() == "mine"
        )
    assert sorted(p.name for p in tmp_path.glob("out*")) == ["out"]  # no lock or temporary folder left


@pytest.mark.cli
@pytest.mark.parametrize(
    "fmt, extra, package", [("onnx", "onnx", "optimum.onnxruntime"), ("openvino", "openvino", "optimum.intel")]
)
def test_cli_missing_backend_names_the_extra(tmp_path, tiny_bert, calibration, fmt, extra, package):
    if installed(package):
        pytest.skip(f"{package} is installed here")
    options = ("--calibration", calibration) if fmt == "openvino" else ()
    line = one_error_line(
        invoke_cli("export", tiny_bert, "--format", fmt, "-q", "int8", *options, "-o", tmp_path / "out")
    )
    assert line.startswith(f"Error: Exporting to {fmt} needs ") and line.endswith(f"pip install jtcse[{extra}]")
    assert _nothing_written(tmp_path / "out")


@pytest.mark.cli
@pytest.mark.slow
def test_cli_backend_that_breaks_inside_the_export_is_one_line(tmp_path, tiny_bert):
    """optimum-onnx 0.1.0 beside transformers 5 imports, then fails at `get_parameter_dtype`; this stand-in
    package fails on that same import, against the transformers installed here."""
    if installed("optimum") or installed("onnxruntime"):
        pytest.skip("a real optimum/onnxruntime is installed here")
    stand_in = tmp_path / "site"
    (stand_in / "onnxruntime").mkdir(parents=True)
    (stand_in / "onnxruntime" / "__init__.py").write_text("")
    (stand_in / "optimum" / "onnxruntime").mkdir(parents=True)
    (stand_in / "optimum" / "__init__.py").write_text("")
    (stand_in / "optimum" / "onnxruntime" / "__init__.py").write_text(
        "from transformers.modeling_utils import get_parameter_dtype\n"
    )
    from helpers.cli import subprocess_env

    pythonpath = subprocess_env()["PYTHONPATH"] + ":" + str(stand_in)
    line = one_error_line(run_cli("export", tiny_bert, "-f", "onnx", "-o", tmp_path / "out", PYTHONPATH=pythonpath))
    assert line.startswith("Error: The installed onnx backend fails inside the export with transformers ")
    assert "get_parameter_dtype" in line and line.endswith("(docs/export.md lists them).")
    assert _nothing_written(tmp_path / "out")


class _Hide:
    """Import hook that makes the named top-level packages absent, as on a machine without them."""

    def __init__(self, *names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.mark.parametrize(
    "fmt, hidden, named",
    [("onnx", ("onnxruntime",), "onnxruntime"), ("openvino", ("optimum",), "optimum.intel.openvino")],
)
def test_check_backend_names_each_missing_package(monkeypatch, fmt, hidden, named):
    monkeypatch.setattr(sys, "meta_path", [_Hide(*hidden), *sys.meta_path])
    for name in list(sys.modules):
        if name.split(".")[0] in hidden:
            monkeypatch.delitem(sys.modules, name)
    with pytest.raises(JTCSEError, match=rf"needs .*{named}.*pip install jtcse\[{fmt}\]"):
        check_backend(fmt)


def test_library_refuses_output_that_is_a_file_or_the_model(tmp_path, tiny_bert):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(JTCSEError, match="is a file"):
        export_model(tiny_bert, target)
    with pytest.raises(JTCSEError, match=r"The output .* is the input"):
        export_model(tiny_bert, tiny_bert, overwrite=True)
    assert target.read_text() == "x"


# ------------------------------------------------------------------ real conversions (OpenVINO installed)


@pytest.fixture(scope="module")
def long_tower(tmp_path_factory):
    """A tiny BERT tower whose position table holds 384 tokens: OpenVINO's calibration pads to 384."""
    from jtcse.testing import make_tiny_tower

    return make_tiny_tower(tmp_path_factory.mktemp("towers") / "bert_384", "bert", seed=3, max_seq_length=384)


def _cosines(tower: str, exported, **backend_options) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(tower, device="cpu").encode(SENTENCES, normalize_embeddings=True)
    model = SentenceTransformer(str(exported), device="cpu", backend="openvino", **backend_options)
    vectors = model.encode(SENTENCES, normalize_embeddings=True)
    return (reference * vectors).sum(axis=1)


@pytest.mark.export
@pytest.mark.slow
@pytest.mark.cli
@needs_openvino
def test_openvino_fp32_export_loads_and_matches_torch(tmp_path, long_tower):
    out = tmp_path / "ov"
    result = run_cli("export", long_tower, "-f", "openvino", "-o", out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "expected str, bytes or os.PathLike object" not in result.stderr  # optimum-intel's offline cache probe
    assert (out / "openvino" / "openvino_model.xml").is_file() and (out / "openvino" / "openvino_model.bin").is_file()
    record = json.loads((out / "export.json").read_text(encoding="utf-8"))
    assert (record["format"], record["quantize"], record["calibration"]) == ("openvino", "none", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ov"]  # no temporary folder or lock left
    assert _cosines(long_tower, out).min() >= 0.9999
    # The output is not replaced without --overwrite; with it, it is.
    assert "holds an earlier export; pass --overwrite" in one_error_line(run_cli("export", long_tower, "-o", out))
    assert run_cli("export", long_tower, "-o", out, "--overwrite").returncode == 0


@pytest.mark.export
@pytest.mark.slow
@pytest.mark.cli
@needs_openvino
def test_openvino_int8_calibrates_on_a_local_file_offline(tmp_path, long_tower, calibration):
    out = tmp_path / "ov8"
    result = run_cli("export", long_tower, "-f", "openvino", "-q", "int8", "--calibration", calibration, "-o", out)
    assert result.returncode == 0, result.stderr[-3000:]
    graph = out / "openvino" / "openvino_model.xml"
    assert "FakeQuantize" in graph.read_text(encoding="utf-8")  # quantized, and under the default file name
    assert not list((out / "openvino").glob("*qint8*"))
    record = json.loads((out / "export.json").read_text(encoding="utf-8"))
    assert record["quantize"] == "int8" and record["calibration"]["sentences"] == len(SENTENCES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.txt", "ov8"]
    cosines = _cosines(long_tower, out)
    assert cosines.mean() >= 0.95, cosines  # int8 of a random tower: close to torch, not equal


@pytest.mark.export
@pytest.mark.slow
@needs_openvino
def test_a_failed_export_leaves_no_temporary_folder(tmp_path, tiny_bert, calibration):
    """The tiny tower's position table (68) is shorter than the 384 tokens OpenVINO calibrates with: refused
    (the quantizer itself would fail deep inside OpenVINO) after the float graph was written, and nothing of
    it is left."""
    out = tmp_path / "ov8"
    with pytest.raises(JTCSEError, match="pads sentences to 384 tokens, but .* holds only 68 positions"):
        export_model(tiny_bert, out, format="openvino", quantize="int8", calibration=calibration)
    assert _nothing_written(out)
