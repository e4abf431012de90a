"""The twin model: inference = sum of CLS, the CAEL cross stream, gradients, save/load/export, bad towers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.cli import run_python

from jtcse import build_twin
from jtcse.errors import JTCSEError
from jtcse.modeling.loading import load_model

SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog near the river bank.",
    "Short.",
    "Every module object has a dictionary that holds its attributes.",
]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(params=["bert", "roberta"])
def towers(request):
    a, b = ("tiny_bert", "tiny_bert_b") if request.param == "bert" else ("tiny_roberta", "tiny_roberta_b")
    return request.getfixturevalue(a), request.getfixturevalue(b)


def _features(model, sentences=SENTENCES):
    return model.preprocess(sentences)


@pytest.mark.slow
def test_encode_is_the_sum_of_the_towers_cls(towers):
    from sentence_transformers import SentenceTransformer

    twin = build_twin(*towers, cael_every=2, max_seq_length=64)
    single = [SentenceTransformer(t).encode(SENTENCES) for t in towers]  # the tiny towers pool CLS
    np.testing.assert_allclose(twin.encode(SENTENCES), single[0] + single[1], atol=1e-5)
    assert twin.get_embedding_dimension() == single[0].shape[1]


def test_no_new_parameters(towers):
    twin = build_twin(*towers)
    tower_params = sum(p.numel() for m in twin[0].tower_models() for p in m.parameters())
    assert sum(p.numel() for p in twin.parameters()) == tower_params


def test_cross_stream_equals_primitive_before_first_cael_and_differs_after(towers):
    twin = build_twin(*towers, cael_every=2).eval()
    with torch.no_grad():
        streams = twin[0].run_streams(_features(twin))
    for t in (0, 1):
        primitive, cross = streams.primitive[t], streams.cross[t]
        assert len(primitive) == len(cross) == 5  # embeddings + 4 layers
        for j in (0, 1):  # before the first CAEL (layer 2)
            assert cross[j] is primitive[j]
        for j in (2, 3, 4):
            assert (cross[j] - primitive[j]).abs().max() > 1e-3


@pytest.mark.parametrize("k", [1, 2, 4])
def test_cael_with_identical_towers_reproduces_the_ordinary_layers(towers, k):
    """Same weights in both towers: V_II = V_I, so every CAEL is the tower's own self-attention layer."""
    twin = build_twin(towers[0], towers[0], cael_every=k).eval()
    with torch.no_grad():
        streams = twin[0].run_streams(_features(twin))
    for primitive, cross in zip(streams.primitive, streams.cross, strict=True):
        for p, c in zip(primitive, cross, strict=True):
            torch.testing.assert_close(c, p, atol=2e-5, rtol=1e-4)


def test_cael_matches_a_hand_written_cross_attention(towers):
    """Last-layer CAEL (k = L): explicit per-head softmax(Q_I K_I^T / sqrt(d) + mask) V_II, then tower I's layer."""
    twin = build_twin(*towers, cael_every=4).eval()
    features = _features(twin)
    with torch.no_grad():
        streams = twin[0].run_streams(features)
        mask = features["attention_mask"]
        layers = [m.encoder.layer[3] for m in twin[0].tower_models()]
        h = [streams.primitive[0][3], streams.primitive[1][3]]
        for me, other in ((0, 1), (1, 0)):
            attn = layers[me].attention.self
            heads, d = attn.num_attention_heads, attn.attention_head_size

            def split(x, heads=heads, d=d):
                return x.view(x.shape[0], x.shape[1], heads, d).permute(0, 2, 1, 3)

            q, k = split(attn.query(h[me])), split(attn.key(h[me]))
            v = split(layers[other].attention.self.value(h[other]))
            scores = q @ k.transpose(-1, -2) / d**0.5 + (1.0 - mask[:, None, None, :].float()) * -1e9
            context = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(h[me].shape)
            attended = layers[me].attention.output(context, h[me])
            expected = layers[me].output(layers[me].intermediate(attended), attended)
            torch.testing.assert_close(streams.cross[me][4], expected, atol=1e-5, rtol=1e-4)


def test_training_forward_outputs(towers):
    twin = build_twin(*towers, cael_every=2).train()
    out = twin(_features(twin))
    n, hidden = len(SENTENCES), twin.get_embedding_dimension()
    for key in (
        "pooled_1",
        "pooled_2",
        "cross_pooled_1",
        "cross_pooled_2",
        "pooler_1",
        "pooler_2",
        "sentence_embedding",
    ):
        assert out[key].shape == (n, hidden), key
    torch.testing.assert_close(out["sentence_embedding"], out["pooled_1"] + out["pooled_2"])
    torch.testing.assert_close(out["token_embeddings"][:, 0], out["sentence_embedding"])
    assert out["token_embeddings_1"].shape == out["attention_mask"].shape + (hidden,)
    twin[0].cael_every = None
    assert "cross_pooled_1" not in twin(_features(twin))


def test_icnce_on_the_cross_stream_reaches_anchor_qk_and_partner_v(tiny_bert, tiny_bert_b):
    from jtcse.losses.functional import icnce

    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=4).train()  # one CAEL: the last layer
    features = twin.preprocess(SENTENCES)
    doubled = {k: torch.cat([v, v]) if torch.is_tensor(v) else v for k, v in features.items()}
    out = twin(doubled)
    n = len(SENTENCES)
    # tower I's cross stream as anchors, its own primitive CLS as candidates: only c_I carries cross gradients
    icnce(
        out["cross_pooled_1"][:n], out["cross_pooled_1"][n:], out["pooled_1"][:n].detach(), out["pooled_1"][n:].detach()
    ).backward()
    tower_1, tower_2 = (m.encoder.layer[3].attention.self for m in twin[0].tower_models())

    def has_grad(linear):
        return linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0

    assert has_grad(tower_1.query) and has_grad(tower_1.key)  # anchor tower: Q, K
    assert has_grad(tower_2.value)  # partner tower: V
    assert not has_grad(tower_1.value) and not has_grad(tower_2.query) and not has_grad(tower_2.key)
    lower = [m.encoder.layer[0].attention.self.query for m in twin[0].tower_models()]
    assert all(has_grad(q) for q in lower)  # through the shared primitive stream into both towers


@pytest.mark.slow
def test_cael_every_never_changes_inference(tiny_bert, tiny_bert_b):
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2)
    reference = twin.encode(SENTENCES)
    twin.train()
    twin(_features(twin))  # a training forward leaves no state behind
    for k in (None, 1, 4):
        twin[0].cael_every = k
        np.testing.assert_array_equal(twin.encode(SENTENCES), reference)
    assert np.abs(build_twin(tiny_bert, tiny_bert_b, cael_every=None).encode(SENTENCES) - reference).max() < 1e-6


def test_truncates_to_max_seq_length(tiny_bert, tiny_bert_b):
    twin = build_twin(tiny_bert, tiny_bert_b, max_seq_length=8)
    assert twin.max_seq_length == 8
    assert _features(twin, [" ".join(["word"] * 100)])["input_ids"].shape[1] == 8
    assert twin.encode([" ".join(["word"] * 100)]).shape == (1, 32)


@pytest.mark.slow
def test_save_load_in_a_fresh_process_and_export_towers(tmp_path, tiny_bert, tiny_bert_b):
    """A cls and a mean twin saved and their towers exported; one fresh interpreter that cannot import jtcse loads
    the twins (their own code, each with its pooling) and the exported towers (plain checkpoints)."""
    np.save(tmp_path / "sentences.npy", np.array(SENTENCES))
    twins, load_twins, load_towers = {}, "", ""
    for pooling in ("cls", "mean"):
        folder = tmp_path / pooling
        twins[pooling] = twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2, max_seq_length=48, pooling=pooling)
        twin.save(str(folder / "twin"))
        twin[0].export_towers(folder / "export")
        config = json.loads((folder / "twin" / "jtcse_twin_config.json").read_text())
        assert config == {"cael_every": 2, "max_seq_length": 48, "pooling": pooling}
        load_twins += f"""
twin = SentenceTransformer({str(folder / "twin")!r}, trust_remote_code=True)
assert twin[0].cael_every == 2 and twin.max_seq_length == 48 and twin[0].pooling == {pooling!r}, twin
np.save({str(folder / "twin.npy")!r}, twin.encode(sentences))
"""
        load_towers += f"""
for i in (1, 2):
    tower = SentenceTransformer({str(folder / "export")!r} + f"/tower_{{i}}")
    np.save({str(folder)!r} + f"/tower_{{i}}.npy", tower.encode(sentences))
"""
    script = f"""
import numpy as np
from sentence_transformers import SentenceTransformer
sentences = list(np.load({str(tmp_path / "sentences.npy")!r}))
{load_twins}
{load_towers}
"""
    run = run_python(script, hide_jtcse=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    for pooling, twin in twins.items():
        folder = tmp_path / pooling
        in_memory = twin.encode(SENTENCES)
        assert np.abs(np.load(folder / "twin.npy") - in_memory).max() < 1e-4, pooling
        towers_sum = np.load(folder / "tower_1.npy") + np.load(folder / "tower_2.npy")
        assert np.abs(towers_sum - in_memory).max() < 1e-4, pooling
        # and in this process through the jtcse loader, which needs no flag
        assert np.abs(load_model(folder / "twin").encode(SENTENCES) - in_memory).max() < 1e-4, pooling


# -- bad towers and settings ------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_layer_bert(tmp_path_factory):
    from jtcse.testing import make_tiny_tower

    return make_tiny_tower(tmp_path_factory.mktemp("towers") / "bert_2l", "bert", num_layers=2)


@pytest.fixture(scope="module")
def wide_bert(tmp_path_factory):
    from jtcse.testing import make_tiny_tower

    return make_tiny_tower(tmp_path_factory.mktemp("towers") / "bert_wide", "bert", hidden=48)


@pytest.mark.slow
def test_mismatched_towers_are_refused(tiny_bert, tiny_roberta, two_layer_bert, wide_bert):
    with pytest.raises(ValueError, match="model type"):
        build_twin(tiny_bert, tiny_roberta)
    with pytest.raises(ValueError, match=r"layer count \(4 vs 2\)"):
        build_twin(tiny_bert, two_layer_bert)
    with pytest.raises(ValueError, match=r"hidden size \(32 vs 48\)"):
        build_twin(tiny_bert, wide_bert)


def test_different_tokenizers_are_refused(tiny_bert, tiny_bert_b, tiny_roberta):
    from sentence_transformers.base.modules import Transformer
    from transformers import AutoTokenizer

    from jtcse.modeling.twin import TwinTowers

    tower_1, tower_2 = Transformer.load(tiny_bert), Transformer.load(tiny_bert_b)
    tower_2.processor = AutoTokenizer.from_pretrained(Path(tiny_roberta))
    with pytest.raises(ValueError, match="different tokenizers") as info:
        TwinTowers(tower_1, tower_2)
    assert type(info.value) is ValueError  # the module ships inside checkpoints: no jtcse exception types


@pytest.fixture(scope="module")
def cased_bert(tmp_path_factory, tiny_bert):
    """tiny_bert with a cased tokenizer (same vocabulary, no lower-casing)."""
    import shutil

    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("towers") / "bert_cased"
    shutil.copytree(tiny_bert, out)
    AutoTokenizer.from_pretrained(tiny_bert, do_lower_case=False).save_pretrained(out)
    return str(out)


@pytest.mark.slow
def test_cased_and_uncased_towers_are_refused(tiny_bert, tiny_bert_b, cased_bert):
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(cased_bert).tokenize("Hello") != AutoTokenizer.from_pretrained(
        tiny_bert
    ).tokenize("Hello")
    with pytest.raises(ValueError, match=r"normalise text differently \(normalizer.lowercase True vs False\)"):
        build_twin(tiny_bert, cased_bert)
    assert build_twin(cased_bert, cased_bert).encode(["Ok"]).shape == (1, 32)  # both cased is fine


@pytest.mark.slow
def test_max_seq_length_beyond_the_position_table_is_clamped(
    tiny_bert, tiny_bert_b, tiny_roberta, tiny_roberta_b, caplog
):
    long = [" ".join(["word"] * 300)]
    with caplog.at_level("WARNING"):
        twin = build_twin(tiny_bert, tiny_bert_b, max_seq_length=1024)
    assert twin.max_seq_length == 68  # the tiny towers' 68 positions
    assert "max_seq_length=1024 exceeds the 68 positions" in caplog.text
    assert twin.encode(long).shape == (1, 32)  # no tensor-size crash on a long sentence
    twin.train()
    twin(twin.preprocess(long))  # the training forward (cross stream) too
    assert build_twin(tiny_roberta, tiny_roberta_b, max_seq_length=1024).max_seq_length == 66  # padding_idx 1 offset


@pytest.mark.slow
def test_minilm_max_seq_length_1024_is_clamped_to_512():
    twin = build_twin(None, None, max_seq_length=1024)
    assert twin.max_seq_length == 512
    assert twin.encode([" ".join(["word"] * 700)]).shape == (1, 384)


def test_bad_cael_every(tiny_bert, tiny_bert_b):
    with pytest.raises(ValueError, match=r"cael_every=3 does not divide.*\[1, 2, 4\]"):
        build_twin(tiny_bert, tiny_bert_b, cael_every=3)
    twin = build_twin(tiny_bert, tiny_bert_b, cael_every=2)[0]
    for bad in (0, -2, 8, True, 2.5, "2"):  # the same check guards the attribute (and so every later change)
        with pytest.raises(ValueError, match=r"cael_every.*\[1, 2, 4\]"):
            twin.cael_every = bad
        assert twin.cael_every == 2


@pytest.mark.slow
def test_bad_tower_paths(tmp_path, tiny_bert, tiny_bert_b):
    with pytest.raises(JTCSEError, match="tower model not found"):
        build_twin(str(tmp_path / "nope"), tiny_bert)
    twin_dir = tmp_path / "twin"
    build_twin(tiny_bert, tiny_bert_b).save(str(twin_dir))
    with pytest.raises(JTCSEError, match="twin checkpoint, not a single tower"):
        build_twin(str(twin_dir), tiny_bert)
    # a tower folder of a twin is an ordinary tower
    assert build_twin(str(twin_dir / "tower_1"), tiny_bert_b).encode(["ok"]).shape == (1, 32)
