"""Distillation of a teacher encoder (a JTCSE twin, an ensemble, any encoder) into one student (JTCSE-D, UCD).

The student is trained on unlabeled sentences to reproduce the teacher's embeddings (EDFSE / JTCSE "-D"
models, after Reimers & Gurevych, 2020), with one of these objectives (``s_i``, ``t_i``: the student's and
the teacher's embedding of sentence ``i``; ``n`` sentences a batch, width ``d``):

==================  ===================================================  ==========================================
objective           loss                                                 class
==================  ===================================================  ==========================================
``mse``             ``mean_i ‖s_i − t_i‖² / d``                          sentence-transformers ``MSELoss``
``mse-normalized``  ``mean_i ‖s_i/‖s_i‖ − t_i/‖t_i‖‖² / d``              :class:`~jtcse.losses.NormalizedMSELoss`
``cosine``          ``mean_i (1 − cos(s_i, t_i))``                       ``EmbedDistillLoss(distance_metric="cosine")``
``similarity``      ``mean_{i≠j} (cos(s_i, s_j) − cos(t_i, t_j))²``      :class:`~jtcse.losses.SimilarityMatrixLoss`
==================  ===================================================  ==========================================

``similarity`` (the default; it scored best side by side, see ``docs/warmup_and_distill.md``) imitates the
teacher's cosines only, so a teacher of any width teaches a student of any width. A sum (``similarity+mse``) trains
on its terms at once (:class:`~jtcse.losses.DistillationSumLoss`), each logged. The three per-vector objectives
need one width: when the teacher is wider or narrower, the student's embedding goes through a learned linear map
to the teacher's width while training (sentence-transformers' ``projection_dim``), and that map is **not** saved:
the student keeps its own architecture, pooling and width. Teacher embeddings are computed once and cached
(:mod:`jtcse.training.teacher_cache`); the student tokenizes the text itself, so teacher and student may use
different tokenizers. With ``passage_sentences`` above 1 the texts are passages of that many consecutive corpus
lines (:func:`~jtcse.corpus.passages`), which the teacher encodes (and caches) as such. The saved student loads with
sentence-transformers alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jtcse.corpus import passages, read_training_sentences
from jtcse.locking import locks_output
from jtcse.schema import check
from jtcse.training.settings import DistillSettings, Objective, TrainingSettings, resolve
from jtcse.training.trainer_run import (
    TrainerRun,
    dev_evaluator,
    run_trainer,
    start_run,
    training_device,
)

if TYPE_CHECKING:
    import numpy as np

TEACHER_CACHE_SUBDIR = "teacher_cache"


def targets_dataset(sentences: Sequence[str], embeddings: np.ndarray):
    """A ``datasets.Dataset`` with a ``sentence`` column and the teacher vectors as ``label``.

    Built from an Arrow fixed-size-list column (no Python lists of floats), returned with the
    ``label`` column formatted as torch tensors so the collator only stacks them.
    """
    import numpy as np
    import pyarrow as pa
    from datasets import Dataset

    dim = int(embeddings.shape[1])
    labels = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(embeddings, np.float32).reshape(-1)), dim)
    table = pa.table({"sentence": pa.array(list(sentences), pa.string()), "label": labels})
    return Dataset(table).with_format("torch", columns=["label"], output_all_columns=True)


PROJECTION_FILE = "distill_projection.safetensors"
"""The training-only projection's weights, kept in each trainer checkpoint so a resumed run continues it."""


def distillation_loss(model, objective: str, teacher_dim: int, *, seed: int = 42):
    """The sentence-transformers loss for ``objective`` (see the module docstring) on ``model``.

    A per-vector objective with a teacher of another width gets a learned projection of the student to
    ``teacher_dim`` (initialised from ``seed``), which lives on the loss and is never saved with the model. A sum
    (``similarity+mse``) is a :class:`~jtcse.losses.DistillationSumLoss` of its terms, whose per-vector terms share
    one such projection.
    """
    import torch

    from jtcse.losses.distillation import DistillationSumLoss

    check(objective, Objective, "objective")
    terms = objective.split("+")
    wider = teacher_dim != model.get_embedding_dimension() and terms != ["similarity"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if len(terms) == 1:
            return _objective_loss(model, objective, teacher_dim if wider else None)
        losses = {term: _objective_loss(model, term, None) for term in terms}
        return DistillationSumLoss(model, losses, projection_dim=teacher_dim if wider else None)


def _objective_loss(model, objective: str, projection: int | None):
    """The loss of one objective (of :data:`~jtcse.training.settings.OBJECTIVES`), with ``projection`` (the
    teacher's width) for a per-vector one."""
    from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss, MSELoss

    from jtcse.losses.distillation import NormalizedMSELoss, SimilarityMatrixLoss

    if objective == "similarity":
        return SimilarityMatrixLoss(model)
    if objective == "mse":
        return MSELoss(model, projection_dim=projection)
    if objective == "mse-normalized":
        return NormalizedMSELoss(model, projection_dim=projection)
    return EmbedDistillLoss(model, distance_metric="cosine", projection_dim=projection)


def _projection_checkpoints(loss, resume_from: str | None):
    """A ``TrainerCallback`` that saves the loss's projection into every trainer checkpoint and, when the run
    resumes from ``resume_from``, loads it back before the first step (the trainer saves only the model)."""
    from transformers import TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    class ProjectionCheckpoints(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            saved = Path(resume_from) / PROJECTION_FILE if resume_from else None
            if saved is not None and saved.is_file():
                loss.load_projection(saved)

        def on_save(self, args, state, control, **kwargs):
            folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            if folder.is_dir():
                loss.save_projection(folder / PROJECTION_FILE)

    return ProjectionCheckpoints()


@locks_output("output_dir")
def distill(
    teacher,
    student=None,
    train_file: str | Path | Sequence[str] | None = None,
    output_dir: str | Path = "runs/distill",
    *,
    dev_file: str | Path | None = None,
    resume: bool = True,
    overwrite: bool = False,
    callbacks: Sequence[Any] = (),
    device: str | None = None,
    settings: DistillSettings | TrainingSettings | None = None,
    text_column: str | None = None,
    **keys: Any,
) -> dict[str, Any]:
    """Train ``student`` to reproduce ``teacher``'s embeddings and save it to ``output_dir``.

    ``teacher``: path or ``SentenceTransformer`` (a JTCSE twin, an ensemble, any encoder). ``student``: path,
    ``SentenceTransformer`` or ``None`` (the embedded MiniLM), kept as it is (architecture, pooling, width);
    How it trains: ``settings`` (a :class:`~jtcse.training.settings.DistillSettings`, or just its
    :class:`~jtcse.training.settings.TrainingSettings`) and/or its keys as keywords (``batch_size=32,
    max_steps=100, objective="mse"`` ...), on top of ``DistillSettings()``: ``student_pooling`` (``cls`` |
    ``mean``) replaces the student's pooling, as JTCSE-D's CLS towers want (changes listed in the summary);
    ``objective`` is one of :data:`~jtcse.training.settings.OBJECTIVES` (module docstring) or a sum of them
    (``similarity+mse``), and a per-vector objective with a teacher of another width trains through a projection
    that is not saved; ``passage_sentences`` joins that many consecutive corpus lines into each text.
    ``train_file``: one-sentence-a-line file, a table or dataset (its ``text_column``), list of sentences, or
    ``None`` (embedded prose). Teacher
    embeddings are cached in ``<output_dir>/teacher_cache`` and reused. ``dev_file`` (STS pairs, :func:`~jtcse.evaluation.sts.read_sts_input`) is scored
    every ``eval_steps``; with ``checkpoint="best-dev"`` the checkpoint with the best dev Spearman is kept. An
    interrupted run resumes from its last trainer checkpoint when ``resume``. ``device`` (``None``: the trainer's choice) is checked with the
    precision before anything loads (:func:`~jtcse.training.trainer_run.training_device`); the teacher encodes there
    too, at that precision.

    Returns the run summary (also written to ``<output_dir>/run_summary.json``).
    """
    from jtcse.modeling.loading import describe_source, load_student
    from jtcse.output_paths import WORKING_FOLDERS, fingerprint
    from jtcse.processes import is_main_process, main_process_first
    from jtcse.training.distributed import pooler_parameters
    from jtcse.training.teacher_cache import sentences_digest, teacher_targets

    settings = resolve(DistillSettings(), settings, keys, "distill")  # checked: before anything is loaded
    training, objective, student_pooling = settings.training, settings.objective, settings.student_pooling
    training_device(device, training.precision)
    sentences, data = read_training_sentences(train_file, "training corpus", text_column)
    if settings.passage_sentences > 1:  # the teacher encodes (and the cache keys) the passages
        sentences = passages(sentences, settings.passage_sentences)
        data["passages"] = len(sentences)
    evaluator = dev_evaluator(dev_file, training, batch_size=training.batch_size)

    student_source = describe_source(student)
    plan = start_run(
        "distill",
        output_dir,
        settings,
        {
            "teacher": fingerprint(teacher, ignore=WORKING_FOLDERS, what="teacher model"),
            # by content: another model saved at the student's path is another input (the embedded one: by name)
            "student": fingerprint(student, ignore=WORKING_FOLDERS, missing_ok=True) or student_source,
            "data": sentences_digest(sentences)[:16],
            "dev_file": fingerprint(dev_file),  # its content: a dev file edited in place is another one
        },
        inputs=[teacher, student, train_file, dev_file],
        resume=resume,
        overwrite=overwrite,
    )
    if plan.finished:
        return plan.summary

    model, changes = load_student(student, pooling=student_pooling, device=device)
    student_dim = model.get_embedding_dimension()

    if is_main_process():
        plan.output.add(TEACHER_CACHE_SUBDIR)  # entered in the output's record before it is written
    # under a multi-process launch rank 0 encodes (or finds the cache) and writes it; the others then read it
    targets = main_process_first(
        lambda: teacher_targets(
            teacher,
            sentences,
            Path(output_dir) / TEACHER_CACHE_SUBDIR,
            batch_size=settings.teacher_batch_size,
            fingerprint=plan.config["teacher"],
            device=device,
            precision=training.precision,
        )
    )
    teacher_dim = int(targets.embeddings.shape[1])
    loss = distillation_loss(model, objective, teacher_dim, seed=training.seed)
    if loss.projection is not None:
        changes.append(
            f"trained through a linear projection {student_dim}->{teacher_dim}, not saved (the student keeps its width)"
        )
        callbacks = [*callbacks, _projection_checkpoints(loss, plan.resume_from)]
    data.update(teacher_cache=str(targets.cache_path), teacher_cache_hit=targets.cache_hit)

    return run_trainer(
        TrainerRun(
            name="distill",
            plan=plan,
            model=model,
            loss=loss,
            train_dataset=targets_dataset(sentences, targets.embeddings),
            settings=training,
            role="student",
            evaluator=evaluator,
            model_info={
                "teacher": describe_source(teacher),
                "student": student_source,
                "changes": changes,
                "teacher_dimension": teacher_dim,
                "student_dimension": student_dim,
                "objective": objective,
            },
            data=data,
            device=device,
            # neither CLS nor mean pooling reads the transformers pooler, so under DDP its parameters get no gradient
            trainer_overrides=dict(ddp_find_unused_parameters=bool(pooler_parameters(model))),
            callbacks=callbacks,
        )
    )
