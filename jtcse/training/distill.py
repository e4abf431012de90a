"""Distillation of a teacher encoder (the JTCSE twin: sum of the towers' CLS) into one CLS tower (JTCSE-D).

    L = mean_i ‖f_student(x_i) − f_teacher(x_i)‖² / d        (sentence-transformers ``MSELoss``)

on unlabeled sentences (EDFSE / JTCSE "-D" models, after Reimers & Gurevych, 2020). Teacher
embeddings are computed once and cached (:mod:`jtcse.training.teacher_cache`); the student tokenizes the
text itself, so teacher and student may use different tokenizers. The saved student is a plain
``Transformer`` + CLS ``Pooling`` checkpoint (plus a ``Dense`` projection only when asked for with
``project=True`` because the widths differ) that loads with sentence-transformers alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import locks_output
from jtcse.training.common import dev_evaluator, read_training_sentences
from jtcse.training.stage import Stage, TrainingSettings, run_stage, set_training_length, start_stage

TEACHER_CACHE_SUBDIR = "teacher_cache"


def targets_dataset(sentences: Sequence[str], embeddings: np.ndarray):
    """A ``datasets.Dataset`` with a ``sentence`` column and the teacher vectors as ``label``.

    Built from an Arrow fixed-size-list column (no Python lists of floats), returned with the
    ``label`` column formatted as torch tensors so the collator only stacks them.
    """
    import pyarrow as pa
    from datasets import Dataset

    dim = int(embeddings.shape[1])
    labels = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(embeddings, np.float32).reshape(-1)), dim)
    table = pa.table({"sentence": pa.array(list(sentences), pa.string()), "label": labels})
    return Dataset(table).with_format("torch", columns=["label"], output_all_columns=True)


def _add_projection(student, teacher_dim: int):
    """Append a linear ``Dense`` (student width → teacher width, identity activation) to ``student``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense
    from torch import nn

    modules = list(student)
    dense = Dense(student.get_embedding_dimension(), teacher_dim, activation_function=nn.Identity())
    return SentenceTransformer(modules=[*modules, dense], device=str(student.device))


DISTILL_SETTINGS = TrainingSettings(eval_steps=250)
"""``distill``'s training settings by default."""


@locks_output("output_dir")
def distill(
    teacher,
    student=None,
    train_file: str | Path | Sequence[str] | None = None,
    output_dir: str | Path = "runs/distill",
    *,
    dev_file: str | Path | None = None,
    teacher_batch_size: int = 128,
    project: bool = False,
    resume: bool = True,
    overwrite: bool = False,
    callbacks: Sequence[Any] = (),
    settings: TrainingSettings | None = None,
    **training: Any,
) -> dict[str, Any]:
    """Train ``student`` to reproduce ``teacher``'s embeddings (MSE) and save it to ``output_dir``.

    ``teacher``: path or ``SentenceTransformer`` (e.g. a JTCSE twin checkpoint). ``student``: path,
    ``SentenceTransformer`` or ``None`` (embedded MiniLM); its pooling is set to CLS (changes listed in
    the summary). ``train_file``: one-sentence-a-line file, list of sentences, or ``None`` (embedded
    prose). Teacher embeddings are cached in ``<output_dir>/teacher_cache`` and reused. Different
    widths are an error unless ``project=True``, which appends a trained linear ``Dense`` layer.
    ``dev_file`` (STS-B format) keeps the checkpoint with the best dev Spearman. How long and how it
    trains: ``settings`` (a :class:`~jtcse.training.stage.TrainingSettings`) and/or its fields as keywords
    (``batch_size=32, max_steps=100`` ...), on top of :data:`DISTILL_SETTINGS`. An interrupted run
    resumes from its last trainer checkpoint when ``resume``.

    Returns the run summary (also written to ``<output_dir>/run_summary.json``).
    """
    from jtcse.modeling.loading import describe_source, load_cls_tower
    from jtcse.training.distributed import main_process_first, pooler_parameters
    from jtcse.training.teacher_cache import save_teacher_targets, sentences_digest, teacher_fingerprint, teacher_targets

    settings = DISTILL_SETTINGS.given(settings, training, "distill")
    sentences, data = read_training_sentences(train_file, "training corpus")
    evaluator = dev_evaluator(dev_file, batch_size=settings.batch_size)

    student_source = describe_source(student)
    plan = start_stage(
        "distill",
        output_dir,
        settings,
        {
            "teacher": teacher_fingerprint(teacher),
            "student": student_source,
            "data": sentences_digest(sentences)[:16],
            "project": project,
            "dev_file": str(dev_file) if dev_file else None,
        },
        resume=resume,
        overwrite=overwrite,
    )
    if plan.finished:
        return plan.summary

    model, changes = load_cls_tower(student, role="student")
    own_length = set_training_length(model, settings, "student")
    student_dim = model.get_embedding_dimension()

    def checked_targets():
        targets = teacher_targets(
            teacher,
            sentences,
            Path(output_dir) / TEACHER_CACHE_SUBDIR,
            batch_size=teacher_batch_size,
            fingerprint=plan.config["teacher"],
            save=False,  # written once every check has passed
        )
        teacher_dim = int(targets.embeddings.shape[1])
        if student_dim != teacher_dim and not project:
            raise JTCSEError(
                f"teacher embeddings have {teacher_dim} dimensions but the student's have {student_dim}. "
                "Use a student of the teacher's width, or pass --project to learn a linear projection "
                "(a Dense layer saved with the student)."
            )
        save_teacher_targets(targets)
        return targets

    # under a multi-process launch rank 0 encodes (or finds the cache), checks and writes it; the others then read it
    targets = main_process_first(checked_targets)
    teacher_dim = int(targets.embeddings.shape[1])
    if student_dim != teacher_dim:
        model = _add_projection(model, teacher_dim)
        changes.append(f"added a linear Dense projection {student_dim}->{teacher_dim}")
    data.update(teacher_cache=str(targets.cache_path), teacher_cache_hit=targets.cache_hit)

    from sentence_transformers.sentence_transformer.losses import MSELoss

    return run_stage(
        Stage(
            name="distill",
            plan=plan,
            model=model,
            loss=MSELoss(model),
            train_dataset=targets_dataset(sentences, targets.embeddings),
            settings=settings,
            evaluator=evaluator,
            model_info={
                "teacher": describe_source(teacher),
                "student": student_source,
                "changes": changes,
                "teacher_dimension": teacher_dim,
                "student_dimension": student_dim,
            },
            data=data,
            restore_max_seq_length=own_length,
            # CLS pooling never reads the transformers pooler, so under DDP its parameters get no gradient
            trainer_overrides=dict(ddp_find_unused_parameters=bool(pooler_parameters(model))),
            callbacks=callbacks,
        )
    )
