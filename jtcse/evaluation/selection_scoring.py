"""Scoring a model on *selection* inputs: labelled data a choice is made on, of every kind a local MTEB task is
(:mod:`jtcse.evaluation.mteb_local_tasks`), each scored by mteb's own evaluator so that a selection score is the
score ``jtcse eval mteb --local-task`` gives for the same model and data.

| input | kind | main score |
| --- | --- | --- |
| an STS file (STS-B layout, or ``sentence1``, ``sentence2``, ``score`` rows: a text table, ``.parquet``, a ``save_to_disk`` folder, ``hf:NAME``) | ``sts`` | cosine Spearman (and per genre) |
| a classification folder or file | ``classification`` | accuracy on a held-out half of its **train** split |
| a BEIR folder | ``retrieval`` | nDCG@10 |
| ``retrieval-pairs:FILE`` (an STS file read as retrieval) | ``retrieval-pairs`` | nDCG@10 |
| ``pair-classification:FILE`` | ``pair-classification`` | max AP |

Every main score is a fraction (Spearman in [-1, 1], the others in [0, 1]), as mteb reports them.

**Classification never reads the test split** (a classification set's test split is what papers report): the
train split alone is read, a stratified half of it (:data:`HELD_OUT`, seed :data:`CHOOSING_SEED`) is the scored
part, and mteb's logistic regression trains on its usual samples (``samples_per_label`` per label, ``n_experiments``
times) drawn from the other half. Written as a ``text``, ``label``, ``split`` file (the first half ``train``, the
held-out half ``test``, in this order), ``jtcse eval mteb --local-task`` gives the same accuracy.

The encoders here serve mteb: :class:`CachedEncoder` encodes each text once per model (the STS file's sentences
again as ``retrieval-pairs`` documents cost nothing), and :class:`EnsembleEncoder` embeds exactly as a saved
:class:`~jtcse.modeling.ensemble.Ensemble` does from its members' cached vectors, so every weight row of a grid is
scored without encoding anything again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.evaluation.sts import STSPairs

logger = logging.getLogger(__name__)

HELD_OUT = 0.5
"""The share of a classification set's train split that is scored when choosing (the rest trains the classifier)."""
CHOOSING_SEED = 42
"""The seed of the held-out split: mteb's own task seed (its undersampling and logistic regression use it too)."""
BATCH_SIZE = 64


@dataclass(frozen=True)
class SelectionInput:
    """One selection input: ``spec`` as given (``PATH`` or ``TYPE:PATH``), its ``kind`` and ``path``, the mteb
    ``task`` that scores it, and for an STS file its ``pairs`` (less the dev file's, scored per genre)."""

    spec: str
    kind: str
    path: Path
    task: Any
    pairs: STSPairs | None = None


def input_kind(spec: str | Path) -> tuple[str, Path]:
    """``(kind, path)`` of a selection input ``PATH`` or ``TYPE:PATH`` (the kind from the layout unless given)."""
    from jtcse.evaluation.mteb_local_tasks import infer_task_type, parse_task_spec

    kind, path = parse_task_spec(spec)
    if not path.exists() and not str(path).startswith("hf:"):
        raise JTCSEError(f"selection file not found: {path}")
    return kind or infer_task_type(path), path


def read_sts_file(path: Path) -> STSPairs:
    """The pairs of an STS file in any layout a local STS task reads: STS-B text (with each pair's genre), a table
    or dataset (:func:`~jtcse.evaluation.sts.read_sts_input`: ``sentence1``, ``sentence2``, ``score`` columns, its
    ``genre`` column when it has one; sentences read as an STS-B file's are), or a text file of such rows under
    another suffix (no genres; sentences as written, as mteb reads them)."""
    from jtcse.evaluation.mteb_local_tasks import read_sts_pairs
    from jtcse.evaluation.sts import is_sts_table, read_sts_input

    try:
        return read_sts_input(path)
    except JTCSEError:
        if is_sts_table(path):
            raise
        first, second, scores = read_sts_pairs(path)  # a table with a header or JSON lines (else the STS-B error)
        return STSPairs(first, second, np.asarray(scores, dtype=np.float64))


def choosing_task(kind: str, path: Path):
    """The mteb task that scores a selection input of ``kind`` (not ``sts``: its pairs are scored by genre): a
    classification set's train split alone, divided (:func:`train_split_only`); any other as ``eval mteb`` reads it."""
    from jtcse.evaluation.mteb_local_tasks import local_task

    return train_split_only(path) if kind == "classification" else local_task(f"{kind}:{path}")


def train_split_only(path: Path):
    """The classification task of ``path`` read from its train split alone: a stratified :data:`HELD_OUT` of it
    (seed :data:`CHOOSING_SEED`) is the scored ``test`` split, the rest the ``train`` split the classifier learns
    from; each in the file's order."""
    from datasets import DatasetDict
    from sklearn.model_selection import train_test_split

    from jtcse.evaluation.mteb_local_tasks import classification_task

    task = classification_task(path, splits=("train",))
    task.load_data()
    train = task.dataset["train"]
    labels = np.asarray(train["label"][:])  # (a datasets column read at once, not item by item)
    values, counts = np.unique(labels, return_counts=True)
    if counts.min() < 2:
        lonely, feature = values[counts.argmin()].item(), train.features["label"]
        named = feature.int2str(lonely) if hasattr(feature, "int2str") else lonely  # a text label as the file has it
        raise JTCSEError(
            f"{path}: label {named!r} has 1 train row; choosing on a classification "
            "set scores a stratified half of its train split, which needs at least 2 rows of every label."
        )
    rows = np.arange(len(train))
    learn, scored = train_test_split(rows, test_size=HELD_OUT, stratify=labels, random_state=CHOOSING_SEED)
    task.dataset = DatasetDict({"train": train.select(np.sort(learn)), "test": train.select(np.sort(scored))})
    return task


def _texts(inputs) -> list[str]:
    return [text for batch in inputs for text in batch["text"]]


def _text_loader(texts: Sequence[str], batch_size: int = BATCH_SIZE):
    """``texts`` as mteb hands them to an encoder: batches of ``{"text": [...]}`` over a ``datasets.Dataset``."""
    from datasets import Dataset
    from torch.utils.data import DataLoader

    return DataLoader(Dataset.from_dict({"text": list(texts)}), batch_size=batch_size)


def _encodes_alike(model) -> bool:
    """Whether ``model`` encodes a text the same as a query, a document or for any task: no non-empty prompt, no
    default prompt, no ``Router`` module (as sentence-transformers' ``encode_query``/``encode_document`` differ)."""
    prompts = [prompt for prompt in (getattr(model, "prompts", None) or {}).values() if prompt]
    routed = any(type(module).__name__ == "Router" for module in model.modules())
    return not prompts and getattr(model, "default_prompt_name", None) is None and not routed


class CachedEncoder:
    """One ``SentenceTransformer`` as mteb encodes it (mteb's ``SentenceTransformerEncoderWrapper``: its prompts,
    ``encode_query``/``encode_document``), each text encoded once: a text asked for again (by another input, or
    another weight row of an ensemble) is served from the cache."""

    def __init__(self, model, batch_size: int = BATCH_SIZE):
        from mteb.models import SentenceTransformerEncoderWrapper

        self.wrapper = SentenceTransformerEncoderWrapper(model)
        self.mteb_model_meta = self.wrapper.mteb_model_meta
        self.batch_size = batch_size
        self.alike = _encodes_alike(model)
        self.tables: dict[Any, dict[str, np.ndarray]] = {}

    def vectors(self, texts: Sequence[str], task_metadata, prompt_type=None, **where) -> np.ndarray:
        """The embeddings of ``texts`` (one row each), encoding only those not encoded before."""
        table = self.tables.setdefault(None if self.alike else (task_metadata.name, prompt_type), {})
        missing = list(dict.fromkeys(text for text in texts if text not in table))
        if missing:
            encoded = self.wrapper.encode(
                _text_loader(missing, self.batch_size),
                task_metadata=task_metadata,
                hf_split=where.get("hf_split", "test"),
                hf_subset=where.get("hf_subset", "default"),
                prompt_type=prompt_type,
                batch_size=self.batch_size,
                show_progress_bar=False,
            )
            table.update(zip(missing, np.asarray(encoded, dtype=np.float32), strict=True))
        return np.stack([table[text] for text in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        return self.vectors(_texts(inputs), task_metadata, prompt_type, hf_split=hf_split, hf_subset=hf_subset)

    def similarity(self, embeddings1, embeddings2):
        return self.wrapper.similarity(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2):
        return self.wrapper.similarity_pairwise(embeddings1, embeddings2)


class EnsembleEncoder:
    """The ensemble of ``members`` (:class:`CachedEncoder`) at ``weights``, embedding as
    :class:`~jtcse.modeling.ensemble.Ensemble` does: each member's embedding L2-normalised in float32, times its
    weight, concatenated (``concat``) or summed (``sum``); compared by cosine, as the saved ensemble is. Every vector
    comes from the members' caches: a grid of weights encodes each text once per member."""

    def __init__(self, members: Sequence[CachedEncoder], weights: Sequence[float], combine: str = "concat"):
        if len(weights) != len(members):
            raise ValueError(f"{len(weights)} weights for {len(members)} members")
        self.members, self.weights, self.combine = list(members), [float(w) for w in weights], combine
        self.mteb_model_meta = members[0].mteb_model_meta.model_copy(update={"name": "ensemble", "revision": None})

    def vectors(self, texts: Sequence[str], task_metadata, prompt_type=None, **where) -> np.ndarray:
        parts = []
        for weight, member in zip(self.weights, self.members, strict=True):
            own = member.vectors(texts, task_metadata, prompt_type, **where)
            norms = np.maximum(np.linalg.norm(own, axis=1, keepdims=True), np.float32(1e-12))  # torch's normalize
            parts.append(np.float32(weight) * (own / norms))
        return np.concatenate(parts, axis=1) if self.combine == "concat" else np.sum(parts, axis=0)

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        return self.vectors(_texts(inputs), task_metadata, prompt_type, hf_split=hf_split, hf_subset=hf_subset)

    def similarity(self, embeddings1, embeddings2):
        from mteb.similarity_functions import cos_sim

        return cos_sim(embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2):
        from mteb.similarity_functions import pairwise_cos_sim

        return pairwise_cos_sim(embeddings1, embeddings2)


def score_input(encoder, item: SelectionInput) -> dict[str, float]:
    """``{"all": main score}`` of ``encoder`` (:class:`CachedEncoder`, :class:`EnsembleEncoder`) on ``item``,
    by mteb's evaluator of its task; an STS file's ``{"all": Spearman, genre: Spearman, ...}`` over its pairs
    (:func:`~jtcse.evaluation.sts.spearman_by_genre`, the cosine Spearman mteb's STS evaluator gives)."""
    from jtcse.evaluation.sts import paired_cosine, spearman_by_genre

    if item.pairs is not None:
        pairs = item.pairs
        unique = list(dict.fromkeys(pairs.sentences1 + pairs.sentences2))
        table = dict(zip(unique, encoder.vectors(unique, item.task.metadata), strict=True))
        return spearman_by_genre(paired_cosine(table, pairs), pairs)
    with _quiet_datasets():
        result = item.task.evaluate(encoder, split="test", encode_kwargs={"batch_size": BATCH_SIZE})
    return {"all": float(next(iter(result.values()))["main_score"])}


def score_inputs(encoder, selections: Mapping[str, SelectionInput]) -> dict[str, dict[str, float]]:
    """``{spec: {"all": main score, ...}}`` of ``encoder`` on every input (:func:`score_input`), each timed in
    the log."""
    out = {}
    for name, item in selections.items():
        started = time.perf_counter()
        out[name] = score_input(encoder, item)
        logger.info("selection %s: %.4f (%.1f s)", name, out[name]["all"], time.perf_counter() - started)
    return out


@contextmanager
def _quiet_datasets():
    """``datasets``' progress bars off while mteb prepares a task's data (one bar per weight row otherwise)."""
    from datasets.utils import logging as datasets_logging

    was_on = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            datasets_logging.enable_progress_bar()
