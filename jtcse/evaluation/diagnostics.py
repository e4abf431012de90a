"""``jtcse diagnose``: geometry and cost of an encoder, per tower for a twin, as JSON plus PNGs.

The model is seen as a list of *encoders* ``(name, hf_model, tokenizer)``: one for a plain
sentence-transformers checkpoint, two for a JTCSE twin (its first module exposes ``tower_models()``).
Layer-wise numbers (CLS energy, condensation, attention) come from each encoder's own forward pass;
alignment / uniformity are measured on the model's sentence embeddings and on each encoder's CLS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from jtcse.errors import JTCSEError
from jtcse.evaluation import geometry
from jtcse.evaluation.inference_cost import eager_attention, encoder_cost
from jtcse.locking import locks_output
from jtcse.output_paths import FolderOutput


@dataclass
class Encoder:
    """One transformer stack to inspect."""

    name: str
    model: torch.nn.Module
    tokenizer: object


def encoders_of(st_model) -> list[Encoder]:
    """The encoders inside a SentenceTransformer: each tower of a twin, else the Transformer module."""
    first = st_model[0]
    if hasattr(first, "tower_models"):
        towers = list(first.tower_models())
        return [Encoder(f"tower{i}", tower, first.tokenizer) for i, tower in enumerate(towers, start=1)]
    if hasattr(first, "auto_model") and getattr(first, "tokenizer", None) is not None:
        return [Encoder("encoder", first.auto_model, first.tokenizer)]
    raise JTCSEError(f"cannot inspect a model whose first module is {type(first).__name__}: it exposes no transformer")


@dataclass
class LayerStats:
    """Per-layer statistics of one encoder over a set of sentences (layer 0 = embedding output)."""

    cls_energy: list[float]  # layers 0..L
    mean_token_cosine: list[float]  # layers 0..L
    attention_maps: list[np.ndarray]  # layers 1..L, each size×size (NaN where no sequence reaches)
    attention_to_first: list[float]  # layers 1..L
    attention_to_last: list[float]  # layers 1..L
    last_cls: torch.Tensor  # (n, D) CLS of the last layer, for alignment/uniformity


def layer_statistics(
    encoder: Encoder, sentences: list[str], max_length: int = 128, batch_size: int = 32, attention_size: int = 24
) -> LayerStats:
    """Run ``encoder`` over ``sentences`` (length-sorted batches) and average the per-layer quantities."""
    model, tokenizer = encoder.model, encoder.tokenizer
    device = next(model.parameters()).device
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    energy_sum = cosine_sum = first_sum = last_sum = None
    att_total = att_count = None
    cls_rows: list[torch.Tensor] = []
    was_training = model.training
    model.eval()
    with eager_attention(model), torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = [sentences[i] for i in order[start : start + batch_size]]
            inputs = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt").to(
                device
            )
            out = model(
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                output_hidden_states=True,
                output_attentions=True,
                return_dict=True,
            )
            mask = inputs["attention_mask"].cpu()
            hidden = torch.stack([h.cpu() for h in out.hidden_states])  # (L+1, B, T, D)
            attn = [a.cpu() for a in out.attentions]
            energy = torch.stack([geometry.cls_energy(h.double(), mask).sum() for h in hidden])
            cosine = torch.stack([geometry.mean_token_cosine(h, mask).sum() for h in hidden])
            shares = [geometry.sink_shares(a, mask) for a in attn]
            to_first = torch.stack([f.sum() for f, _ in shares])
            to_last = torch.stack([last.sum() for _, last in shares])
            sums = [geometry.attention_sums(a, mask, attention_size) for a in attn]
            totals = torch.stack([s for s, _ in sums])
            counts = torch.stack([c for _, c in sums])
            if energy_sum is None:
                energy_sum, cosine_sum, first_sum, last_sum = energy, cosine, to_first, to_last
                att_total, att_count = totals, counts
            else:
                energy_sum += energy
                cosine_sum += cosine
                first_sum += to_first
                last_sum += to_last
                att_total += totals
                att_count += counts
            cls_rows.append(hidden[-1][:, 0].float())
    model.train(was_training)
    n = len(sentences)
    cls = torch.cat(cls_rows)
    cls = cls[torch.as_tensor(np.argsort(order))]  # back to input order
    with np.errstate(invalid="ignore", divide="ignore"):
        maps = (att_total / att_count).numpy()
    return LayerStats(
        cls_energy=(energy_sum / n).tolist(),
        mean_token_cosine=(cosine_sum / n).tolist(),
        attention_maps=list(maps),
        attention_to_first=(first_sum / n).tolist(),
        attention_to_last=(last_sum / n).tolist(),
        last_cls=cls,
    )


def _encoder_cls(encoder: Encoder, sentences: list[str], max_length: int, batch_size: int) -> torch.Tensor:
    model, tokenizer = encoder.model, encoder.tokenizer
    device = next(model.parameters()).device
    rows = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            inputs = tokenizer(
                sentences[start : start + batch_size],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            rows.append(model(**inputs).last_hidden_state[:, 0].float().cpu())
    return torch.cat(rows)


def _positive_pairs(pairs, threshold: float, max_pairs: int | None):
    """``((firsts, seconds), sentences)``: the pairs scoring above ``threshold`` and every sentence of ``pairs``,
    the first ``max_pairs`` of each (``(None, None)`` without pairs)."""
    if pairs is None:
        return None, None
    keep = pairs.scores > threshold
    if not keep.any():
        raise JTCSEError(f"no pair scores above {threshold}; alignment needs positive pairs")
    positives = (
        [s for s, k in zip(pairs.sentences1, keep, strict=True) if k][:max_pairs],
        [s for s, k in zip(pairs.sentences2, keep, strict=True) if k][:max_pairs],
    )
    return positives, list(dict.fromkeys(pairs.sentences1 + pairs.sentences2))[:max_pairs]


@locks_output("out_dir")
def run_diagnostics(
    st_model,
    sentences: list[str],
    out_dir: str | Path,
    *,
    pairs=None,
    positive_threshold: float = 4.0,
    seq_len: int = 128,
    max_length: int = 128,
    batch_size: int = 32,
    attention_size: int = 24,
    max_pairs: int | None = None,
    model_name: str = "",
    inputs=(),
) -> dict:
    """Compute every diagnostic, write PNGs and ``report.json`` into ``out_dir``; return the report.

    ``pairs`` (an :class:`STSPairs`) adds alignment over pairs scoring above ``positive_threshold`` and
    uniformity over all their sentences, as in Wang & Isola / SimCSE (STS-B, threshold 4);
    ``max_pairs`` keeps the first pairs / sentences only, to bound the cost. ``out_dir`` is written as a folder of
    ``jtcse diagnose``'s own (:func:`diagnose_output`), which is never one of ``inputs`` (the files read).
    """
    from jtcse.evaluation import plots

    if len(sentences) < 2:
        raise JTCSEError("diagnose needs at least 2 sentences (uniformity is over pairs of sentences)")
    out = diagnose_output(out_dir, inputs)
    out.check()
    out.path.mkdir(parents=True, exist_ok=True)
    encoders = encoders_of(st_model)
    report: dict = {
        "model": model_name,
        "n_sentences": len(sentences),
        "encoders": {},
        "alignment_uniformity": {},
        "plots": [],
    }

    positives, pair_sentences = _positive_pairs(pairs, positive_threshold, max_pairs)
    if positives is not None:
        report["n_positive_pairs"] = len(positives[0])
        report["n_pair_sentences"] = len(pair_sentences)

    def au_entry(embed) -> dict:
        entry = {"uniformity": geometry.uniformity(embed(sentences))}
        if positives is not None:
            entry["alignment"] = geometry.alignment(embed(positives[0]), embed(positives[1]))
            entry["uniformity_pairs"] = geometry.uniformity(embed(pair_sentences))
        return entry

    st_embed = lambda xs: torch.as_tensor(st_model.encode(xs, batch_size=batch_size, convert_to_numpy=True))  # noqa: E731
    report["alignment_uniformity"]["model"] = au_entry(st_embed)

    energy_curves, cosine_curves = {}, {}
    total_macs = total_params = 0
    for encoder in encoders:
        stats = layer_statistics(
            encoder, sentences, max_length=max_length, batch_size=batch_size, attention_size=attention_size
        )
        condensation = geometry.depth_correlation(stats.mean_token_cosine[1:])
        cost = encoder_cost(encoder.model, seq_len)
        total_macs += cost["macs"]
        total_params += cost["params"]
        title = f"{encoder.name}: mean attention per layer (first {attention_size} positions)"
        att_png = _plot(out, f"attention_{encoder.name}.png", plots.plot_attention_grid, stats.attention_maps, title)
        report["plots"].append(att_png)
        report["encoders"][encoder.name] = {
            "layers": list(range(len(stats.cls_energy))),
            "cls_energy": stats.cls_energy,
            "mean_token_cosine": stats.mean_token_cosine,
            "condensation": condensation,
            "attention_to_first_token": stats.attention_to_first,
            "attention_to_last_token": stats.attention_to_last,
            "attention_png": att_png,
            "cost": cost,
        }
        energy_curves[encoder.name] = stats.cls_energy[1:]
        cosine_curves[encoder.name] = stats.mean_token_cosine[1:]
        cls_of = lambda xs, enc=encoder: _encoder_cls(enc, xs, max_length, batch_size)  # noqa: E731
        report["alignment_uniformity"][f"{encoder.name}-cls"] = au_entry(cls_of)

    report["cost_total"] = {"seq_len": seq_len, "macs": total_macs, "params": total_params}
    curves = plots.plot_layer_curves
    report["plots"].append(
        _plot(out, "condensation.png", curves, cosine_curves, "mean token cosine", "condensation per layer")
    )
    report["plots"].append(
        _plot(out, "cls_energy.png", curves, energy_curves, "‖h_cls‖ / ‖H_others‖_F", "CLS energy per layer")
    )
    if positives is not None:
        points = {k: (v["uniformity_pairs"], v["alignment"]) for k, v in report["alignment_uniformity"].items()}
        report["plots"].append(_plot(out, "alignment_uniformity.png", plots.plot_alignment_uniformity, points))
    out.write_json("report.json", report)
    return report


def _plot(out: FolderOutput, name: str, draw, data, *labels) -> str:
    """``draw(data, path, *labels)`` into ``out/name`` (entered in its record, written whole or not at all); ``name``."""
    with out.atomic(name) as tmp:
        draw(data, tmp, *labels)
    return name


def diagnose_output(out_dir: str | Path, inputs=()) -> FolderOutput:
    """``out_dir`` as what ``jtcse diagnose`` writes (:class:`~jtcse.output_paths.FolderOutput`)."""
    return FolderOutput(out_dir, "jtcse diagnose", inputs=inputs)
