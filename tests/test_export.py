"""``jtcse export``: every bad input is refused before anything is written, in one line.

The conversion itself needs Optimum, which cannot be installed beside transformers 5 here (see
docs/export.md); these tests cover everything up to the backend call.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers.cli import one_error_line, run_cli

from jtcse.errors import JTCSEError
from jtcse.export import check_backend, export_model


def _optimum_installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="module")
def twin_dir(tmp_path_factory, tiny_bert, tiny_bert_b):
    from jtcse import build_twin

    path = tmp_path_factory.mktemp("twin") / "twin"
    build_twin(tiny_bert, tiny_bert_b, cael_every=None).save(str(path))
    return path


def _untouched(path) -> bool:
    return not path.exists()


@pytest.mark.cli
def test_cli_bad_inputs_are_one_line_and_write_nothing(tmp_path, tiny_bert, twin_dir):
    out = tmp_path / "out"
    not_model = tmp_path / "not_a_model"
    not_model.mkdir()
    (not_model / "notes.txt").write_text("hello")
    cases = {
        ("--format", "tflite"): "Unknown export format 'tflite'; valid ones: onnx, openvino.",
        ("--quantize", "int4"): "Unknown quantization 'int4'; valid ones: none, int8.",
    }
    for args, message in cases.items():
        assert one_error_line(run_cli("export", tiny_bert, *args, "-o", out)) == f"Error: {message}"
    line = one_error_line(run_cli("export", not_model, "-o", out))
    assert "is not a model folder (no modules.json or config.json)" in line
    line = one_error_line(run_cli("export", tmp_path / "missing", "-o", out))
    assert line == f"Error: Model folder not found: {tmp_path / 'missing'}"
    line = one_error_line(run_cli("export", twin_dir, "-o", out))
    assert "is a twin; export takes single towers" in line and "export_towers" in line and "sum their embeddings" in line
    assert _untouched(out)
    # An existing non-empty output is kept unless --overwrite.
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    line = one_error_line(run_cli("export", tiny_bert, "-o", out))
    assert "is not empty; pass --overwrite" in line and (out / "keep.txt").read_text() == "mine"


@pytest.mark.cli
@pytest.mark.parametrize("fmt, extra, package", [("onnx", "onnx", "optimum.onnxruntime"), ("openvino", "openvino", "optimum.intel")])
def test_cli_missing_backend_names_the_extra(tmp_path, tiny_bert, fmt, extra, package):
    if _optimum_installed(package):
        pytest.skip(f"{package} is installed here")
    line = one_error_line(run_cli("export", tiny_bert, "--format", fmt, "-q", "int8", "-o", tmp_path / "out"))
    assert line.startswith(f"Error: Exporting to {fmt} needs ") and line.endswith(f"pip install jtcse[{extra}]")
    assert not (tmp_path / "out").exists()


class _Hide:
    """Import hook that makes the named top-level packages absent, as on a machine without them."""

    def __init__(self, *names):
        self.names = names

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.mark.parametrize("fmt, hidden, named", [("onnx", ("onnxruntime",), "onnxruntime"), ("openvino", ("optimum",), "optimum.intel.openvino")])
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
    with pytest.raises(JTCSEError, match="must differ"):
        export_model(tiny_bert, tiny_bert, overwrite=True)
    assert target.read_text() == "x"
