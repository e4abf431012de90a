"""Geometry diagnostics and inference cost, checked against direct (loop / numpy) computation."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import torch

from jtcse.errors import JTCSEError
from jtcse.evaluation import geometry
from jtcse.evaluation.inference_cost import count_macs, encoder_cost

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Kids play.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "It rains.",
    "Two dogs run across a snowy field together.",
]


def png_size(path) -> tuple[int, int]:
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_alignment_uniformity_match_numpy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    yn = y / np.linalg.norm(y, axis=1, keepdims=True)
    assert geometry.alignment(torch.tensor(x), torch.tensor(y)) == pytest.approx(np.mean(np.sum((xn - yn) ** 2, 1)))
    pair_terms = [np.exp(-2 * np.sum((xn[i] - xn[j]) ** 2)) for i in range(7) for j in range(i + 1, 7)]
    assert geometry.uniformity(torch.tensor(x)) == pytest.approx(np.log(np.mean(pair_terms)))


def test_token_statistics_match_loops():
    rng = np.random.default_rng(1)
    hidden = rng.normal(size=(3, 6, 4))
    lengths = [6, 3, 2]
    mask = np.array([[1] * n + [0] * (6 - n) for n in lengths])
    energy = geometry.cls_energy(torch.tensor(hidden), torch.tensor(mask)).numpy()
    cosine = geometry.mean_token_cosine(torch.tensor(hidden), torch.tensor(mask)).numpy()
    attn = rng.random(size=(3, 2, 6, 6))
    attn /= attn.sum(-1, keepdims=True)
    first, last = geometry.sink_shares(torch.tensor(attn), torch.tensor(mask))
    total, count = geometry.attention_sums(torch.tensor(attn), torch.tensor(mask), size=4)
    exp_total, exp_count = np.zeros((4, 4)), np.zeros((4, 4))
    for b, n in enumerate(lengths):
        h = hidden[b, :n]
        assert energy[b] == pytest.approx(np.linalg.norm(h[0]) / np.sqrt(np.sum(h[1:] ** 2)))
        z = h / np.linalg.norm(h, axis=1, keepdims=True)
        assert cosine[b] == pytest.approx(np.mean([z[i] @ z[j] for i in range(n) for j in range(n)]))
        a = attn[b].mean(0)
        assert first[b].item() == pytest.approx(np.mean([a[q, 0] for q in range(n)]))
        assert last[b].item() == pytest.approx(np.mean([a[q, n - 1] for q in range(n)]))
        for q in range(min(n, 4)):
            for k in range(min(n, 4)):
                exp_total[q, k] += a[q, k]
                exp_count[q, k] += 1
    np.testing.assert_allclose(total.numpy(), exp_total)
    np.testing.assert_allclose(count.numpy(), exp_count)


def test_depth_correlation():
    assert geometry.depth_correlation([0.1, 0.2, 0.5, 0.9]) == {
        "spearman": pytest.approx(1.0),
        "kendall": pytest.approx(1.0),
    }
    assert geometry.depth_correlation([0.9, 0.5, 0.2])["kendall"] == pytest.approx(-1.0)


def test_macs_of_linear_and_of_bert_match_analytic_counts(tiny_bert):
    from transformers import AutoModel

    mlp = torch.nn.Sequential(torch.nn.Linear(10, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    assert count_macs(mlp, torch.zeros(5, 10)) == 5 * (10 * 7 + 7 * 3)
    bert = AutoModel.from_pretrained(tiny_bert)
    cfg = bert.config
    n, d, f, L = 20, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    per_layer = 4 * n * d * d + 2 * n * d * f + 2 * n * n * d  # Q,K,V,out; FFN; QKᵀ and AV
    cost = encoder_cost(bert, n)
    assert cost["macs"] == L * per_layer + d * d  # + pooler dense on the CLS vector
    assert cost["params"] == sum(p.numel() for p in bert.parameters())


def test_layer_statistics_match_hidden_states(tiny_bert):
    from jtcse.evaluation.diagnostics import encoders_of, layer_statistics
    from jtcse.modeling.loading import load_model

    st = load_model(tiny_bert, max_seq_length="max")
    (enc,) = encoders_of(st)
    before = enc.model.config._attn_implementation
    stats = layer_statistics(enc, SENTENCES, batch_size=2, attention_size=8)
    assert enc.model.config._attn_implementation == before
    n_layers = enc.model.config.num_hidden_layers
    assert len(stats.cls_energy) == n_layers + 1 and len(stats.attention_maps) == n_layers
    energies = np.zeros(n_layers + 1)
    cosines = np.zeros(n_layers + 1)
    for sentence in SENTENCES:  # one sentence at a time: no padding at all
        ids = enc.tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            hs = enc.model(**ids, output_hidden_states=True).hidden_states
        for layer, h in enumerate(hs):
            h = h[0].double().numpy()
            energies[layer] += np.linalg.norm(h[0]) / np.linalg.norm(h[1:]) / len(SENTENCES)
            z = h / np.linalg.norm(h, axis=1, keepdims=True)
            cosines[layer] += (z @ z.T).mean() / len(SENTENCES)
    np.testing.assert_allclose(stats.cls_energy, energies, rtol=1e-4)
    np.testing.assert_allclose(stats.mean_token_cosine, cosines, rtol=1e-4)
    cls = st.encode(SENTENCES, convert_to_tensor=True)  # CLS pooling: the same vectors, in input order
    np.testing.assert_allclose(stats.last_cls.numpy(), cls.numpy(), atol=1e-5)
    rows = np.nansum(stats.attention_maps[0], axis=1)  # each query's weights sum to 1 over its valid keys
    assert np.all(rows[:3] <= 1 + 1e-6)


@pytest.mark.slow
def test_run_diagnostics_report_and_pngs(tiny_bert, tmp_path):
    from jtcse.evaluation.diagnostics import run_diagnostics
    from jtcse.evaluation.sts import STSPairs
    from jtcse.modeling.loading import load_model

    st = load_model(tiny_bert, max_seq_length="max")
    pairs = STSPairs(SENTENCES[:4], SENTENCES[1:5], np.array([4.5, 1.0, 4.2, 3.0]))
    report = run_diagnostics(st, SENTENCES, tmp_path, pairs=pairs, seq_len=16, batch_size=2, attention_size=8)
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk == json.loads(json.dumps(report))
    emb = torch.as_tensor(st.encode(SENTENCES))
    au = report["alignment_uniformity"]["model"]
    assert au["uniformity"] == pytest.approx(geometry.uniformity(emb), rel=1e-3)  # float32, other batching
    pos1 = torch.as_tensor(st.encode([SENTENCES[0], SENTENCES[2]]))
    pos2 = torch.as_tensor(st.encode([SENTENCES[1], SENTENCES[3]]))
    assert au["alignment"] == pytest.approx(geometry.alignment(pos1, pos2), rel=1e-3)
    assert report["n_positive_pairs"] == 2
    enc = report["encoders"]["encoder"]
    assert enc["cost"]["seq_len"] == 16 and report["cost_total"]["macs"] == enc["cost"]["macs"]
    assert set(enc["condensation"]) == {"spearman", "kendall"}
    sizes = {name: png_size(tmp_path / name) for name in report["plots"]}
    assert sizes == {
        "attention_encoder.png": (1200, 300),  # 4 layers: 4 panels of 3×3 in at 100 dpi
        "condensation.png": (600, 400),
        "cls_energy.png": (600, 400),
        "alignment_uniformity.png": (500, 400),
    }


class TwinStandIn(torch.nn.Module):
    """The interface the JTCSE twin module exposes (tower_models(), tokenizer), built from real towers."""

    def __init__(self, a, b):
        super().__init__()
        self.a, self.b = a[0], b[0]

    def tower_models(self):
        return self.a.auto_model, self.b.auto_model

    @property
    def tokenizer(self):
        return self.a.tokenizer


def test_twin_is_inspected_per_tower(tiny_bert, tiny_bert_b):
    from sentence_transformers import SentenceTransformer

    from jtcse.evaluation.diagnostics import encoders_of, layer_statistics

    a, b = SentenceTransformer(tiny_bert), SentenceTransformer(tiny_bert_b)
    encoders = encoders_of([TwinStandIn(a, b)])
    assert [e.name for e in encoders] == ["tower1", "tower2"]
    s1 = layer_statistics(encoders[0], SENTENCES[:2])
    s2 = layer_statistics(encoders[1], SENTENCES[:2])
    assert s1.cls_energy != s2.cls_energy
    with pytest.raises(JTCSEError, match="exposes no transformer"):
        encoders_of([torch.nn.Linear(2, 2)])


@pytest.mark.slow
def test_cli_diagnose(tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    corpus = tmp_path / "s.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    # --out, the old spelling of -o/--output, still works, with a warning
    result = CliRunner().invoke(
        app, ["diagnose", tiny_bert, "--sentences", str(corpus), "--out", str(tmp_path / "d"), "--seq-len", "8"]
    )
    assert result.exit_code == 0, result.output
    assert "DeprecationWarning: --out is deprecated; use -o/--output." in result.stderr
    report = json.loads((tmp_path / "d" / "report.json").read_text())
    assert report["n_sentences"] == 5 and "alignment" not in report["alignment_uniformity"]["model"]
    assert sorted(report["plots"]) == ["attention_encoder.png", "cls_energy.png", "condensation.png"]
    one = tmp_path / "one.txt"
    one.write_text("only one\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["diagnose", tiny_bert, "--sentences", str(one), "-o", str(tmp_path / "e")])
    assert isinstance(result.exception, JTCSEError) and "at least 2 sentences" in str(result.exception)


@pytest.mark.slow
def test_cli_diagnose_clamps_max_length_to_the_position_table(tiny_bert, tmp_path):
    from typer.testing import CliRunner

    from jtcse.cli import app

    corpus = tmp_path / "s.txt"
    corpus.write_text("\n".join(SENTENCES + [" ".join(["word"] * 150)]) + "\n", encoding="utf-8")
    args = [
        "diagnose",
        tiny_bert,
        "--sentences",
        str(corpus),
        "-o",
        str(tmp_path / "d"),
        "--seq-len",
        "8",
        "--max-length",
        "200",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "d" / "report.json").read_text())["n_sentences"] == 6
