"""Every checkpoint jtcse writes encodes at the length of the model it started from, not at the length it trained
at (issue 37, item 0): a twin, its exported towers, a warm-up, a distilled student, an ensemble and an OpenVINO
export. The starts here hold 256 tokens (a tiny BERT with a 260-position table, saved at 256); every model trains
at 16. A plain ``transformers`` start's length is the one loading it gives, within its position table.

"Not cut" is checked against a control: a text longer than 16 tokens must embed differently from its first 16
tokens (as text), and the same model set to 16 tokens must embed it exactly as those 16 tokens, which proves the
comparison would catch a checkpoint that cuts."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from helpers.backends import needs_openvino
from helpers.cli import run_python

from jtcse.defaults import default_corpus_sentences

# one worker runs the module, so that its module fixtures (six trainings, one fresh interpreter) run once, not once
# per pytest-xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("checkpoint_length")]

START = 256  # the starts' own length
TRAINED_AT = 16
SENTENCES = default_corpus_sentences(limit=24)
LONG = " ".join(sentence.lower() for sentence in SENTENCES[:6])  # about 100 tokens: past 16, within 256
SETTINGS = dict(batch_size=4, max_steps=2, max_seq_length=TRAINED_AT)


def reading(model, text: str, cut_at: int) -> dict:
    """What ``model`` (a loaded ``SentenceTransformer``) does with ``text``: its length, whether ``text`` embeds
    otherwise than its first ``cut_at`` tokens written as text (``differs``: not cut there), and the control, that
    the model set to ``cut_at`` tokens embeds ``text`` as that prefix (``cut_is_prefix``). Sent to a fresh
    interpreter as source, so it uses only numpy and the model."""
    import numpy as np

    tokenizer = model.tokenizer
    ids = tokenizer(text)["input_ids"]
    prefix = tokenizer.decode(ids[1 : cut_at - 1])
    same_tokens = tokenizer(prefix)["input_ids"] == ids[: cut_at - 1] + ids[-1:]
    whole, head = model.encode([text, prefix])
    own = model.max_seq_length
    model.max_seq_length = cut_at
    cut = model.encode([text])[0]
    model.max_seq_length = own
    return {
        "max_seq_length": own,
        "tokens": len(ids),
        "prefix_is_the_first_tokens": same_tokens,
        "differs": not np.allclose(whole, head, atol=1e-4),
        "cut_is_prefix": bool(np.allclose(cut, head, atol=1e-5)),
    }


def _assert_not_cut(read: dict, expected_length: int) -> None:
    assert "error" not in read, read["error"]
    assert read["max_seq_length"] == expected_length
    assert read["tokens"] > TRAINED_AT and read["prefix_is_the_first_tokens"]
    assert read["cut_is_prefix"]  # the control: cut at 16, the model embeds the prefix
    assert read["differs"]  # as saved, the long text is read past its first 16 tokens


def _saved_lengths(folder: Path) -> dict[str, int]:
    """Every length a checkpoint writes down: each tokenizer's ``model_max_length`` and a twin's config."""
    lengths = {
        str(path.relative_to(folder)): json.loads(path.read_text(encoding="utf-8"))["model_max_length"]
        for path in folder.rglob("tokenizer_config.json")
        if "checkpoints" not in path.parts
    }
    for path in folder.rglob("jtcse_twin_config.json"):
        lengths[str(path.relative_to(folder))] = json.loads(path.read_text(encoding="utf-8"))["max_seq_length"]
    return lengths


@pytest.fixture(scope="module")
def starts(tmp_path_factory) -> tuple[str, str]:
    """Two tiny BERT towers of one tokenizer whose own length is 256 (260 positions)."""
    from jtcse.testing import make_tiny_tower

    root = tmp_path_factory.mktemp("starts")
    return tuple(make_tiny_tower(root / f"start_{s}", "bert", seed=s, max_seq_length=START) for s in (0, 1))


@pytest.fixture(scope="module")
def plain_roberta(tiny_roberta) -> Path:
    """The plain ``transformers`` folder the tiny RoBERTa tower was made from: 68 positions, of which RoBERTa reads
    66 (its positions start after the padding index); its tokenizer says 512, and sentence-transformers' default
    is the 68 of the position table."""
    path = Path(tiny_roberta).parent / f"{Path(tiny_roberta).name}.hf"
    assert not (path / "modules.json").exists() and (path / "config.json").is_file()
    return path


@pytest.fixture(scope="module")
def written(tmp_path_factory, starts, plain_roberta) -> dict[str, tuple[Path, int]]:
    """Each kind of checkpoint, trained at 16 tokens, and the length it must keep: ``{kind: (folder, length)}``."""
    from jtcse.modeling.loading import load_model
    from jtcse.training.distill import distill
    from jtcse.training.ensemble import save_ensemble
    from jtcse.training.simcse import train_simcse
    from jtcse.training.twin import train_twin

    root = tmp_path_factory.mktemp("written")
    start_a, start_b = starts
    train_twin(start_a, start_b, SENTENCES, root / "twin", show_progress=False, plot=False, **SETTINGS)
    load_model(root / "twin")[0].export_towers(root / "towers")
    train_simcse(start_a, SENTENCES, root / "warmup", **SETTINGS)
    train_simcse(plain_roberta, SENTENCES, root / "warmup_of_plain", **SETTINGS)
    distill(root / "twin", start_a, SENTENCES, root / "student", **SETTINGS)
    save_ensemble([root / "twin", start_a], root / "ensemble")
    return {
        "twin": (root / "twin", START),
        "twin tower": (root / "towers" / "tower_2", START),
        "warm-up": (root / "warmup", START),
        "warm-up of a plain transformers model": (root / "warmup_of_plain", 66),
        "student": (root / "student", START),
        "ensemble": (root / "ensemble", START),
    }


@pytest.fixture(scope="module")
def fresh_readings(written) -> dict[str, dict]:
    """Each checkpoint opened by one fresh interpreter that cannot import jtcse, as a user opens it: its
    :func:`reading`, or the error opening or encoding it raised."""
    paths = {kind: str(folder) for kind, (folder, _) in written.items()}
    code = f"""
import json
from sentence_transformers import SentenceTransformer
{inspect.getsource(reading)}
out = {{}}
for kind, path in {paths!r}.items():
    try:  # one failure named, not hiding the other checkpoints
        out[kind] = reading(SentenceTransformer(path, trust_remote_code=True, device="cpu"), {LONG!r}, {TRAINED_AT})
    except Exception as err:
        out[kind] = {{"error": f"{{type(err).__name__}}: {{err}}"[:300]}}
print(json.dumps(out))
"""
    result = run_python(code, hide_jtcse=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_twin_trained_at_16_tokens_from_a_start_of_256_encodes_at_256_without_jtcse(written, fresh_readings):
    twin, _ = written["twin"]
    assert json.loads((twin / "run_summary.json").read_text())["settings"]["max_seq_length"] == TRAINED_AT
    _assert_not_cut(fresh_readings["twin"], START)


@pytest.mark.parametrize("kind", ["twin tower", "warm-up", "student", "ensemble"])
def test_every_checkpoint_encodes_at_its_starts_length(kind, written, fresh_readings):
    _assert_not_cut(fresh_readings[kind], written[kind][1])


def test_a_plain_transformers_start_keeps_the_length_loading_gives_it_within_its_positions(
    plain_roberta, written, fresh_readings
):
    """sentence-transformers opens the plain RoBERTa at 68 (its tokenizer's 512, capped at the position table), two
    more than RoBERTa reads: jtcse opens it at 66, and its warm-up is saved at 66, so a long text no longer fails
    with an index error past the table."""
    from sentence_transformers import SentenceTransformer

    from jtcse.modeling.loading import load_model

    assert SentenceTransformer(str(plain_roberta), device="cpu").max_seq_length == 68
    assert load_model(plain_roberta).max_seq_length == 66
    read = fresh_readings["warm-up of a plain transformers model"]
    assert read["tokens"] > 68  # read to the end of its table without an error
    _assert_not_cut(read, 66)


KINDS = ["twin", "twin tower", "warm-up", "warm-up of a plain transformers model", "student", "ensemble"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_saved_tokenizer_and_twin_config_says_the_starts_length(kind, written):
    """A saved tokenizer that said 16 would cut the inputs of users who tokenize for themselves; an ensemble's
    members (here the twin's towers and the start) each say it too."""
    folder, length = written[kind]
    lengths = _saved_lengths(folder)
    assert lengths and set(lengths.values()) == {length}, lengths


def test_an_untrained_twin_takes_its_first_towers_length(starts):
    from jtcse.modeling.build import build_twin

    assert build_twin(*starts).max_seq_length == START
    assert build_twin(*starts, max_seq_length=TRAINED_AT).max_seq_length == TRAINED_AT


@pytest.mark.export
@needs_openvino
def test_an_openvino_export_of_a_twin_tower_keeps_the_starts_length(written, tmp_path):
    from sentence_transformers import SentenceTransformer

    from jtcse.backend_export import export_model

    out = export_model(written["twin tower"][0], tmp_path / "ov", format="openvino")
    assert set(_saved_lengths(out).values()) == {START}
    model = SentenceTransformer(str(out), device="cpu", backend="openvino")
    _assert_not_cut(reading(model, LONG, TRAINED_AT), START)
