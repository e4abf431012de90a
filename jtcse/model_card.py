"""README.md model cards for the checkpoints jtcse writes, built on sentence-transformers' card machinery.

:class:`JTCSEModelCardData` extends ``SentenceTransformerModelCardData`` (front matter, architecture, versions, the
similarity matrix of the usage snippet) with what a jtcse checkpoint must say: what the model is (twin, warm-up
tower, distilled student, ensemble), its towers or teacher, the pooling, the recipe, the data counts, the dev
Spearman history, the citations and, once ``jtcse eval sts --update-card`` ran, the SentEval STS table (a
``model-index`` entry and a Markdown table).

* :func:`write_model_card` renders ``<output_dir>/README.md`` for a model and its :class:`CardFacts`;
  :func:`attach_card_data` gives a model the card it writes when it is saved.
* :func:`update_card_sts` writes an STS table into an existing card, in place; :func:`update_card_mteb` the main
  scores of ``jtcse eval mteb``.

The facts come from where the model was made: a training run's summary (``facts_from_run_summary`` in
:mod:`jtcse.training.run_summary`), an ensemble's members (:func:`jtcse.training.ensemble.ensemble_card_facts`).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentence_transformers.sentence_transformer.model_card import SentenceTransformerModelCardData

from jtcse.errors import JTCSEError

CARD_NAME = "README.md"
TEMPLATE_PATH = Path(__file__).parent / "model_card_template.md"
EMBEDDED_MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
STS_TASK_TYPE = "semantic-similarity"
STS_METRIC = "spearman_cosine"
STS_BEGIN = "<!-- jtcse:sts-table -->"
STS_END = "<!-- /jtcse:sts-table -->"
MTEB_BEGIN = "<!-- jtcse:mteb-table -->"
MTEB_END = "<!-- /jtcse:mteb-table -->"
MTEB_SOURCE = "MTEB"

KINDS = {
    "twin": "JTCSE twin: two encoder towers, coupled by cross-attention while training, whose [CLS] vectors are summed",
    "warmup": "SimCSE warm-up tower: one encoder trained with the unsupervised SimCSE objective",
    "distilled": "distilled student: one encoder trained to reproduce a teacher's embeddings",
    "ensemble": "jtcse ensemble: several encoders whose L2-normalised embeddings are weighted and concatenated (or summed) into one vector",
}

RECIPES = {
    "twin": "JTCSE: both towers are trained together on unlabeled sentences with an InfoNCE loss per tower "
    "(dropout noise makes the positive), an inter-tower InfoNCE (ICNCE) and the tensor-modulus constraint (ICTM); "
    "cross-attention layers (CAEL) couple the towers while training.",
    "warmup": "Unsupervised SimCSE: each sentence is its own positive through dropout noise (or its paraphrase, "
    "when pairs are given), the rest of the batch are negatives; InfoNCE with temperature τ "
    "(sentence-transformers MultipleNegativesRankingLoss with scale 1/τ).",
    "distilled": "Embedding distillation: on unlabeled sentences the student learns to reproduce the teacher, "
    "with the objective named in the settings (similarity: the in-batch cosine-similarity matrix; cosine, "
    "mse-normalized, mse: each embedding, through a training-only projection when the widths differ); the "
    "teacher's embeddings are computed once and cached. The student keeps its own architecture, pooling and width.",
    "ensemble": "Each member encodes the sentence with its own tokenizer, truncation and pooling; the members' "
    "L2-normalised embeddings, each times its weight, are concatenated (or summed) into one vector, with no further "
    "training. With equal weights the cosine of two concatenated embeddings is the mean of the members' cosines. "
    'This is the "+UC" ensemble of the JTCSE paper (Table I): a JTCSE twin combined with an independently trained '
    "checkpoint.",
}

DISTILL_OBJECTIVES = {
    "similarity": "the student's in-batch cosine-similarity matrix is fitted to the teacher's (mean squared difference "
    "of the cosines of every pair of sentences in a batch); only the teacher's cosines are imitated, so the widths may "
    "differ",
    "cosine": "each student embedding is pulled towards the teacher's by cosine distance (1 − cos), through a "
    "training-only projection when the widths differ",
    "mse-normalized": "mean squared error between the L2-normalised student and teacher embeddings, through a "
    "training-only projection when the widths differ",
    "mse": "mean squared error between the student's and the teacher's embeddings, through a training-only projection "
    "when the widths differ",
}
"""What each ``jtcse distill`` objective does, for a distilled card's recipe (:func:`distilled_recipe`)."""


def distilled_recipe(objective: str | None) -> str:
    """The recipe of a student distilled with ``objective`` (of :data:`DISTILL_OBJECTIVES`, or a sum: ``a+b``)."""
    terms = str(objective).split("+")
    if not all(term in DISTILL_OBJECTIVES for term in terms):
        return RECIPES["distilled"]
    what = " + ".join(f"`{t}` ({DISTILL_OBJECTIVES[t]})" for t in terms) if terms[1:] else DISTILL_OBJECTIVES[terms[0]]
    return (
        f"Embedding distillation: on unlabeled sentences the student learns to reproduce the teacher with the "
        f"`{objective}` objective: {what}. The teacher's embeddings are computed once and "
        "cached. The student keeps its own architecture, pooling and width."
    )


SIMCSE_CITATION = """
@inproceedings{gao2021simcse,
    title = {{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
    author = {Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
    booktitle = {Proceedings of the 2021 Conference on Empirical Methods in Natural Language Processing},
    year = {2021}
}
"""


@dataclass
class CardFacts:
    """What a card states about a checkpoint beyond its architecture.

    ``kind``: one of :data:`KINDS`; ``recipe``: how it was trained (default: the kind's, :data:`RECIPES`).
    ``towers``: the twin's towers or the starting model(s); ``teacher``: a distilled student's teacher.
    ``pooling``: ``None`` reads it from the model.
    ``settings``: recipe hyperparameters; ``data``: data counts (lines read, skipped, duplicates,
    truncated …); ``dev_history``: ``(step, spearman)`` pairs (Spearman as a fraction), with
    ``best_dev_spearman`` and ``final_dev_spearman`` (the saved model's);
    ``citations``: ``{name: bibtex}`` (empty: the kind's papers); ``sts_results``: ``{task: percent}``
    from ``jtcse eval sts``. ``model_path``: how the usage snippet names the model (default: the
    checkpoint folder). ``base_model``: a Hugging Face Hub id for the front matter, when known.
    """

    kind: str
    recipe: str | None = None
    towers: list[str] = field(default_factory=list)
    teacher: str | None = None
    pooling: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    dev_history: list[tuple[int, float]] = field(default_factory=list)
    best_dev_spearman: float | None = None
    final_dev_spearman: float | None = None
    citations: dict[str, str] = field(default_factory=dict)
    sts_results: dict[str, float] = field(default_factory=dict)
    model_path: str | None = None
    base_model: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise JTCSEError(f"model card kind must be one of {', '.join(KINDS)}, not {self.kind!r}.")


def default_citations(kind: str) -> dict[str, str]:
    """The papers behind each kind of checkpoint, as ``{name: bibtex}``."""
    from sentence_transformers.sentence_transformer.losses import MSELoss

    from jtcse.losses.jtcse_loss import JTCSELoss

    jtcse = JTCSELoss.citation.fget(None)
    if kind == "warmup":
        return {"SimCSE": SIMCSE_CITATION}
    if kind == "distilled":  # MSELoss cites the paper that set up distilling a sentence-embedding teacher
        return {"Sentence-embedding distillation": MSELoss.citation.fget(None), "JTCSE (teacher)": jtcse}
    if kind == "ensemble":
        return {"JTCSE (+UC ensembles)": jtcse}
    return {"JTCSELoss": jtcse} if kind == "twin" else {}


def loss_citations(names) -> dict[str, str]:
    """``{class name: bibtex}`` of the loss classes named (jtcse's, else sentence-transformers'); a name that is
    no loss class, or whose citation needs an instance, is left out."""
    import sentence_transformers.sentence_transformer.losses as st_losses

    import jtcse.losses

    out: dict[str, str] = {}
    for name in names:
        cls = getattr(jtcse.losses, str(name), None) or getattr(st_losses, str(name), None)
        try:
            out[str(name)] = cls.citation.fget(None)
        except Exception:  # not a loss class, or its citation needs an instance
            continue
    return out


def describe_pooling(model) -> str:
    """How ``model`` turns token states into one vector, read from its modules."""
    parts = []
    for module in model:
        name = type(module).__name__
        if name == "TwinTowers":
            parts.append(
                "sum of the two towers' last-layer [CLS] vectors"
                if getattr(module, "pooling", "cls") == "cls"
                else f"sum of the two towers' {module.pooling}-pooled last hidden states"
            )
        elif name == "Ensemble":
            how = "concatenated" if module.combine == "concat" else "summed"
            parts.append(f"each member pools for itself; the members' L2-normalised embeddings, weighted, {how}")
        elif hasattr(module, "pooling_mode"):
            mode = module.pooling_mode
            parts.append(f"{'+'.join(mode) if isinstance(mode, tuple) else mode} pooling")
        elif name == "Dense":
            parts.append("a linear Dense projection")
        elif name == "Normalize":
            parts.append("L2 normalisation")
    return ", then ".join(parts) or "unknown"


def _markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    align = "|" + "|".join(":--" if i == 0 else "--:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", align]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def format_value(value: Any) -> str:
    """A table cell: floats to 6 significant digits, strings as code, lists and dicts inline, ``–`` for nothing."""
    if value is None or value == "" or value == [] or value == {}:
        return "–"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={format_value(v)}" for k, v in value.items())
    return f"`{value}`" if isinstance(value, str) else str(value)


def sts_average(results: dict[str, float]) -> float | None:
    scores = [v for k, v in results.items() if k.lower() not in ("avg", "average")]
    return round(sum(scores) / len(scores), 2) if scores else None


def sts_markdown(results: dict[str, float], note: str = "") -> str:
    """The STS section body: one row of Spearman ×100 per task plus their average (and ``note``), between markers."""
    tasks = [k for k in results if k.lower() not in ("avg", "average")]
    table = _markdown_table(
        ["Model", *tasks, "Avg."],
        [["this model", *(f"{results[t]:.2f}" for t in tasks), f"{sts_average(results):.2f}"]],
    )
    return (
        f"{STS_BEGIN}\n### Semantic Textual Similarity (SentEval protocol)\n\n"
        "Spearman correlation ×100 between cosine similarity and gold scores (`jtcse eval sts`)"
        f"{'; ' + note if note else ''}.\n\n{table}\n{STS_END}"
    )


def sts_eval_results(results: dict[str, float]) -> list:
    """``huggingface_hub.EvalResult`` entries (one per task, Spearman as a fraction) for the model-index."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type=STS_TASK_TYPE,
            task_name="Semantic Similarity",
            dataset_type=task,
            dataset_name=task,
            metric_type=STS_METRIC,
            metric_name="Spearman Cosine",
            metric_value=round(score / 100, 4),
        )
        for task, score in results.items()
        if task.lower() not in ("avg", "average")
    ]


def sts_results_in(eval_results: list) -> dict[str, float]:
    """``{task: Spearman ×100}`` of the STS entries among ``huggingface_hub.EvalResult``s, in SentEval's task order."""
    from jtcse.evaluation.senteval_data import SENTEVAL_STS_TASKS

    found = {
        r.dataset_name: round(float(r.metric_value) * 100, 2)
        for r in eval_results
        if r.task_type == STS_TASK_TYPE and r.metric_type == STS_METRIC
    }
    order = {task: i for i, task in enumerate(SENTEVAL_STS_TASKS)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


@dataclass
class JTCSEModelCardData(SentenceTransformerModelCardData):
    """``SentenceTransformerModelCardData`` plus :class:`CardFacts`, rendered with jtcse's template."""

    facts: CardFacts | None = None
    local_files_only: bool = True  # checkpoints are local folders; no hub look-ups for base models
    template_path: Path = field(default=TEMPLATE_PATH, init=False, repr=False)

    def try_to_set_base_model(self) -> None:
        if self.facts is not None and self.facts.base_model:
            self.base_model = self.facts.base_model

    def get_default_model_name(self) -> str:
        kind = self.facts.kind if self.facts else "model"
        label = {"twin": "JTCSE twin", "warmup": "SimCSE warm-up tower", "distilled": "distilled JTCSE student"}
        return label.get(kind, "jtcse ensemble")

    def _snippet_lines(self, load_lines: list[str]) -> str:
        examples = self.usage_examples or []
        lines = [*load_lines, "sentences = ["]
        lines += [f"    {text!r}," for text in examples]
        lines += [
            "]",
            "embeddings = model.encode(sentences)",
            "print(embeddings.shape)",
            f"# [{len(examples)}, {self.model.get_embedding_dimension()}]",
            "similarities = model.similarity(embeddings, embeddings)",
            "print(similarities)",
        ]
        if self.similarities:
            lines.append(self.similarities)
        return "```python\n" + "\n".join(lines) + "\n```"

    def generate_usage_snippet(self) -> str:
        # the folder as an absolute path, so the snippet runs from any directory
        folder = str(Path(self.save_dir).resolve()) if self.save_dir else "path/to/model"
        path = (self.facts.model_path if self.facts else None) or self.model_id or folder
        if self.facts is not None and self.facts.kind in ("twin", "ensemble"):
            remote = self._snippet_lines(
                [
                    "from sentence_transformers import SentenceTransformer",
                    "",
                    f"# the {self.facts.kind}'s module code is loaded from the checkpoint folder",
                    f"model = SentenceTransformer({str(path)!r}, trust_remote_code=True)",
                ]
            )
            local = self._snippet_lines(
                ["from jtcse.modeling.loading import load_model", "", f"model = load_model({str(path)!r})"]
            )
            note = "With jtcse installed, `jtcse.modeling.loading.load_model` opens it without that flag:"
            return f"{remote}\n\n{note}\n\n{local}"
        return self._snippet_lines(
            ["from sentence_transformers import SentenceTransformer", "", f"model = SentenceTransformer({str(path)!r})"]
        )

    def get_model_specific_metadata(self) -> dict[str, Any]:
        metadata = super().get_model_specific_metadata()
        facts = self.facts
        if facts is None:
            return metadata
        citations = dict(facts.citations) or default_citations(facts.kind)
        dev_rows = [[int(step), f"{float(score):.4f}"] for step, score in facts.dev_history]
        metadata.update(
            kind=facts.kind,
            kind_description=KINDS[facts.kind],
            recipe=facts.recipe or RECIPES[facts.kind],
            towers=list(facts.towers),
            teacher=facts.teacher,
            pooling=facts.pooling or describe_pooling(self.model),
            settings_table=_markdown_table(
                ["Setting", "Value"], [[k, format_value(v)] for k, v in facts.settings.items()]
            )
            if facts.settings
            else "",
            data_table=_markdown_table(["Count", "Value"], [[k, format_value(v)] for k, v in facts.data.items()])
            if facts.data
            else "",
            dev_table=_markdown_table(["Step", "Spearman (cosine)"], dev_rows) if dev_rows else "",
            best_dev_spearman=facts.best_dev_spearman,
            final_dev_spearman=facts.final_dev_spearman,
            sts_section=sts_markdown(facts.sts_results) if facts.sts_results else "",
            citations=citations,
        )
        if facts.sts_results:
            from huggingface_hub.repocard_data import eval_results_to_model_index

            metadata["model-index"] = eval_results_to_model_index(self.model_name, sts_eval_results(facts.sts_results))
        return metadata


def check_writable(folder: str | Path, *, card: bool = False) -> Path:
    """``folder`` as a Path, or a :class:`JTCSEError` when its card cannot be (or must not be) rewritten.

    A folder or README.md without write permission counts as read-only even for root: its owner
    marked it so, and the checkpoint is left untouched. ``card``: the README.md must already exist.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise JTCSEError(f"{folder} is not a local checkpoint folder; a model card can only be written into one.")
    if card and not (folder / CARD_NAME).is_file():
        raise JTCSEError(f"{folder} has no {CARD_NAME} model card to update.")
    any_write = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for path in (folder, folder / CARD_NAME):
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & any_write):
            raise JTCSEError(
                f"{path} is read-only, so its model card cannot be updated; nothing was changed. "
                "Make it writable (chmod u+w) or copy the checkpoint first."
            )
    return folder


def attach_card_data(model, facts: CardFacts) -> JTCSEModelCardData:
    """Give ``model`` a :class:`JTCSEModelCardData` holding ``facts``: from then on the card
    sentence-transformers writes when it saves the model (``model.save(path)``) is jtcse's."""
    old = model.model_card_data
    # sentence-transformers names a model after its class when it saves it; that default gives way to ours
    named = old.model_name and not old.model_name.startswith(type(model).__name__)
    data = JTCSEModelCardData(
        facts=facts,
        language=old.language or ["en"],
        license=old.license,
        model_name=old.model_name if named else None,
        model_id=old.model_id,
        train_datasets=old.train_datasets,
        eval_datasets=old.eval_datasets,
    )
    data.add_tags("jtcse")
    data.register_model(model)
    model.model_card_data = data
    return data


def write_model_card(model, output_dir: str | Path, facts: CardFacts) -> Path:
    """Render the card of ``model`` (a ``SentenceTransformer``) with ``facts`` and write ``<output_dir>/README.md``.

    The model keeps the :class:`JTCSEModelCardData` (:func:`attach_card_data`), so a card
    sentence-transformers regenerates is this one.
    """
    from sentence_transformers.base.model_card import generate_model_card

    from jtcse.locking import atomic_write_text

    output_dir = check_writable(output_dir)
    data = attach_card_data(model, facts)
    data.save_dir = str(output_dir)
    return atomic_write_text(output_dir / CARD_NAME, generate_model_card(model))


def _place_section(text: str, section: str, begin: str, end: str, after: str | None = None) -> str:
    """``text`` with ``section`` between the markers ``begin``/``end`` (replacing an earlier one), else after the
    marker ``after``, else under the "## Evaluation" heading, else before "## Training Details", else at the end."""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: section, text, count=1)
    if after is not None and after in text:
        return text.replace(after, f"{after}\n\n{section}", 1)
    if "\n## Evaluation\n" in text:
        return text.replace("\n## Evaluation\n", f"\n## Evaluation\n\n{section}\n", 1)
    if "\n## Training Details" in text:
        return text.replace("\n## Training Details", f"\n## Evaluation\n\n{section}\n\n## Training Details", 1)
    return text.rstrip("\n") + f"\n\n## Evaluation\n\n{section}\n"


def _update_card(output_dir: str | Path, new: list, section, markers: tuple[str, ...]) -> Path:
    """Merge the ``huggingface_hub.EvalResult`` entries ``new`` into ``<output_dir>/README.md``'s ``model-index``
    (replacing earlier entries of the same task type, dataset and metric), then place ``section(all entries)`` in its
    text (:func:`_place_section` with ``markers``). Read-only checkpoints raise (see :func:`check_writable`)."""
    from huggingface_hub import ModelCard

    from jtcse.output_paths import write_text_in_place

    output_dir = check_writable(output_dir, card=True)
    path = output_dir / CARD_NAME
    card = ModelCard.load(path)
    replaced = {(r.task_type, r.dataset_type, r.metric_type) for r in new}
    kept = [r for r in (card.data.eval_results or []) if (r.task_type, r.dataset_type, r.metric_type) not in replaced]
    card.data.eval_results = kept + new
    if not card.data.model_name:
        card.data.model_name = output_dir.name
    text = _place_section(card.text, section(card.data.eval_results), *markers)
    return write_text_in_place(output_dir, CARD_NAME, f"---\n{card.data.to_yaml()}\n---\n{text}")


def update_card_sts(output_dir: str | Path, results: dict[str, float], note: str = "") -> Path:
    """Write the STS ``results`` (``{task: Spearman ×100}``) into ``<output_dir>/README.md`` in place: one
    ``model-index`` entry per task (:func:`_update_card`) and a table of every STS entry, between the STS markers
    (:func:`_place_section`); ``note`` (e.g. how inputs were truncated) follows the table's caption."""
    if not results:
        raise JTCSEError("no STS scores to write into the model card.")
    section = lambda entries: sts_markdown(sts_results_in(entries), note)  # noqa: E731
    return _update_card(output_dir, sts_eval_results(results), section, (STS_BEGIN, STS_END))


def mteb_eval_results(results: dict[str, dict]) -> list:
    """``huggingface_hub.EvalResult`` entries (source MTEB, main score as a fraction) of ``jtcse eval mteb``'s summary
    entries ``{task: {"main_score", "metric", "type", "hf_task_type"}}``."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type=entry["hf_task_type"],
            task_name=entry["type"],
            dataset_type=task,
            dataset_name=task,
            metric_type=entry["metric"],
            metric_name=entry["metric"],
            metric_value=round(float(entry["main_score"]), 4),
            source_name=MTEB_SOURCE,
            source_url="https://github.com/embeddings-benchmark/mteb",
        )
        for task, entry in results.items()
    ]


def mteb_markdown(entries: list) -> str:
    """The MTEB section body: one row per MTEB entry of the model-index (task, type, main metric, score ×100)."""
    rows = [
        [r.dataset_name, r.task_name, f"`{r.metric_type}`", f"{float(r.metric_value) * 100:.2f}"]
        for r in entries
        if r.source_name == MTEB_SOURCE
    ]
    table = _markdown_table(["Task", "Type", "Main score", "this model (×100)"], rows)
    return (
        f"{MTEB_BEGIN}\n### MTEB\n\nMain score of each task ×100, scored by mteb's own evaluators "
        f"(`jtcse eval mteb`).\n\n{table}\n{MTEB_END}"
    )


def update_card_mteb(output_dir: str | Path, results: dict[str, dict]) -> Path:
    """Write ``jtcse eval mteb``'s main scores (its summary's entries of the tasks that ran) into
    ``<output_dir>/README.md`` in place: ``model-index`` entries and a table of every MTEB entry, after the STS table."""
    if not results:
        raise JTCSEError("no MTEB scores to write into the model card.")
    return _update_card(output_dir, mteb_eval_results(results), mteb_markdown, (MTEB_BEGIN, MTEB_END, STS_END))
