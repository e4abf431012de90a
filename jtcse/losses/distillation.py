"""Embedding-distillation objectives that sentence-transformers does not ship, in its ``EmbedDistillLoss`` form.

sentence-transformers has ``MSELoss`` (raw vectors) and ``EmbedDistillLoss`` (``mse``, ``l2``, ``cosine``, an
optional learned projection of the student to the teacher's width that is not saved with the model). The first
two here complete the set :mod:`jtcse.training.distill` offers, and :class:`DistillationSumLoss` trains on several
of them at once; all take the cached teacher embeddings as the ``label`` column, as their parent does, and compute
in float32 under any autocast (:func:`~jtcse.devices.in_float32`: the normalisation, the cosine matrices, the
squared differences; a projection too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from sentence_transformers.base.losses.merged_forward import embed_columns
from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss, MSELoss
from torch import Tensor, nn

from jtcse.devices import in_float32


class NormalizedMSELoss(EmbedDistillLoss):
    def __init__(self, model, projection_dim: int | None = None) -> None:
        r"""
        MSE between the L2-normalised student and teacher embeddings:

        .. math:: L = \frac{1}{n d} \sum_i \Big\lVert \frac{s_i}{\lVert s_i\rVert} - \frac{t_i}{\lVert t_i\rVert} \Big\rVert^2
                  = \frac{2}{n d} \sum_i \big(1 - \cos(s_i, t_i)\big)

        so it ranks like ``EmbedDistillLoss(distance_metric="cosine")`` at a scale ``2/d`` (which matters to
        gradient clipping and learning-rate choice, not to the optimum).

        Args:
            model: the student SentenceTransformer.
            projection_dim: the teacher's width, when it differs from the student's: a learned linear map of the
                student to that width before normalising (trained with the student, not saved with it).

        References:
            - Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation (MSE distillation
              to cached teacher embeddings): https://arxiv.org/abs/2004.09813
            - ``docs/warmup_and_distill.md`` (``jtcse distill --objective mse-normalized``)

        Requirements:
            1. The teacher's embeddings of each sentence in a ``label`` column, as for sentence-transformers'
               ``MSELoss``.

        Inputs:
            +--------------------+--------------------------------------------------+
            | Inputs             | Labels                                           |
            +====================+==================================================+
            | sentence           | teacher embeddings ``(batch_size, teacher_dim)`` |
            +--------------------+--------------------------------------------------+

        Relations:
            - sentence-transformers' ``MSELoss`` is the same on the raw vectors; ``EmbedDistillLoss`` with
              ``distance_metric="cosine"`` has the same optimum at another scale.
            - :class:`SimilarityMatrixLoss` imitates the teacher's in-batch cosines instead of its vectors (no
              projection needed for a wider teacher).
            - :func:`jtcse.training.distill.distill` trains with it (``objective="mse-normalized"``).

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer

                from jtcse.losses import NormalizedMSELoss

                student = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")  # 384-d
                teacher = SentenceTransformer("sentence-transformers/all-mpnet-base-v2")  # 768-d
                sentences = ["A man is playing a guitar.", "The committee approved the budget.", "It rained all day."]
                train_dataset = Dataset.from_dict({"sentence": sentences, "label": teacher.encode(sentences).tolist()})
                loss = NormalizedMSELoss(student, projection_dim=teacher.get_embedding_dimension())

                trainer = SentenceTransformerTrainer(model=student, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__(model, distance_metric="mse", projection_dim=projection_dim)

    @in_float32
    def compute_loss_from_embeddings(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> Tensor:
        losses = []
        for student, teacher in zip(embeddings, teacher_embeddings, strict=True):
            teacher = teacher.to(device=student.device, dtype=student.dtype)
            if self.projection is not None:
                student = self.projection(student)
            unit = nn.functional.normalize
            losses.append(nn.functional.mse_loss(unit(student, dim=-1), unit(teacher, dim=-1)))
        return torch.stack(losses).mean()

    def get_config_dict(self) -> dict[str, Any]:
        return {"projection_dim": self.projection_dim}

    @property
    def citation(self) -> str:
        return MSELoss.citation.fget(self)  # the MSE distillation it normalises


class SimilarityMatrixLoss(EmbedDistillLoss):
    def __init__(self, model) -> None:
        r"""
        Match the student's in-batch cosine-similarity matrix to the teacher's:

        .. math:: L = \frac{1}{n(n-1)} \sum_{i \ne j} \big(\cos(s_i, s_j) - \cos(t_i, t_j)\big)^2

        over the ``n`` sentences of a batch. Only the teacher's cosines are imitated, never its coordinates, so
        the student keeps its own width and space (no projection: a teacher of any width, e.g. a concatenated
        ensemble, teaches a narrower student), and the objective is the quantity STS and retrieval use.
        Invariant to rotations and scalings of either space.

        Args:
            model: the student SentenceTransformer.

        References:
            - Tung and Mori, Similarity-Preserving Knowledge Distillation (ICCV 2019): the student matches the
              teacher's in-batch similarity matrix; here on cosines of sentence embeddings.
            - ``docs/warmup_and_distill.md`` (``jtcse distill``, whose default objective this is)

        Requirements:
            1. The teacher's embeddings of each sentence in a ``label`` column (any width).
            2. At least two sentences per batch.

        Inputs:
            +--------------------+--------------------------------------------------+
            | Inputs             | Labels                                           |
            +====================+==================================================+
            | sentence           | teacher embeddings ``(batch_size, teacher_dim)`` |
            +--------------------+--------------------------------------------------+

        Relations:
            - :class:`NormalizedMSELoss` and sentence-transformers' ``MSELoss`` / ``EmbedDistillLoss`` match the
              teacher's vectors one by one (a wider teacher needs a projection).
            - :func:`jtcse.training.distill.distill` trains with it (``objective="similarity"``, the default).

        Example:
            ::

                from datasets import Dataset
                from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer

                from jtcse.losses import SimilarityMatrixLoss
                from jtcse.modeling.loading import load_model

                teacher = load_model("runs/ensemble")  # e.g. `jtcse ensemble` of a twin and MiniLM: any width
                student = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
                corpus = Dataset.from_dict({"sentence": ["The tide is coming in.", "She paints at night.", "Buses run late."]})
                # the teacher's vectors, computed once, are the labels (a wider teacher needs no projection)
                train_dataset = corpus.map(lambda rows: {"label": teacher.encode(rows["sentence"])}, batched=True)
                loss = SimilarityMatrixLoss(student)

                trainer = SentenceTransformerTrainer(model=student, train_dataset=train_dataset, loss=loss)
                trainer.train()
        """
        super().__init__(model, distance_metric="mse", projection_dim=None)

    @in_float32
    def compute_loss_from_embeddings(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> Tensor:
        losses = []
        for student, teacher in zip(embeddings, teacher_embeddings, strict=True):
            n = student.size(0)
            if n < 2:
                raise ValueError("SimilarityMatrixLoss needs at least two sentences per batch.")
            s = nn.functional.normalize(student, dim=-1)
            t = nn.functional.normalize(teacher.to(device=student.device, dtype=student.dtype), dim=-1)
            diff = s @ s.T - t @ t.T  # the diagonal is 1 - 1 = 0 for non-zero vectors
            losses.append(diff.square().sum() / (n * (n - 1)))
        return torch.stack(losses).mean()

    def get_config_dict(self) -> dict[str, Any]:
        return {}

    @property
    def citation(self) -> str:
        return """
@inproceedings{tung2019similarity,
    title = {Similarity-Preserving Knowledge Distillation},
    author = {Tung, Frederick and Mori, Greg},
    booktitle = {Proceedings of the IEEE/CVF International Conference on Computer Vision (ICCV)},
    year = {2019},
}
"""


class DistillationSumLoss(EmbedDistillLoss):
    def __init__(self, model, losses: Mapping[str, EmbedDistillLoss], projection_dim: int | None = None) -> None:
        r"""
        The sum of several distillation objectives on the same batch, each term logged under its name:

        .. math:: L = \sum_k L_k(s, t)

        The student's embeddings are computed once and handed to every term. With ``projection_dim`` the terms
        that compare vectors one by one see the student through one shared learned projection to the teacher's
        width (trained with the student, not saved with it); :class:`SimilarityMatrixLoss` sees the student as it
        is. The terms are built without projections of their own.

        Args:
            model: the student SentenceTransformer.
            losses: ``{name: loss}``, each an ``EmbedDistillLoss`` without a projection.
            projection_dim: the teacher's width, when it differs from the student's and a term compares vectors.

        References:
            - ``jtcse distill --objective similarity+mse`` (:func:`jtcse.training.distill.distillation_loss`)

        Requirements:
            1. The teacher's embeddings of each sentence in a ``label`` column.

        Inputs:
            +--------------------+--------------------------------------------------+
            | Inputs             | Labels                                           |
            +====================+==================================================+
            | sentence           | teacher embeddings ``(batch_size, teacher_dim)`` |
            +--------------------+--------------------------------------------------+

        Relations:
            - Each term alone is the objective of that name (:class:`SimilarityMatrixLoss`, ``MSELoss`` ...); the
              trainer sums the terms this loss returns and logs each, as for the twin's loss.

        Example:
            ::

                from sentence_transformers.sentence_transformer.losses import MSELoss

                from jtcse.losses import DistillationSumLoss, SimilarityMatrixLoss

                loss = DistillationSumLoss(student, {"similarity": SimilarityMatrixLoss(student), "mse": MSELoss(student)})
        """
        super().__init__(model, distance_metric="mse", projection_dim=projection_dim)
        self.losses = nn.ModuleDict(losses)

    @in_float32
    def terms(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> dict[str, Tensor]:
        """``{name: term}`` of the student's and the teacher's embeddings (one tensor per text column), in float32
        under any autocast, the shared projection included."""
        projected = embeddings if self.projection is None else [self.projection(e) for e in embeddings]
        return {
            name: loss.compute_loss_from_embeddings(
                embeddings if isinstance(loss, SimilarityMatrixLoss) else projected, teacher_embeddings
            )
            for name, loss in self.losses.items()
        }

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> Tensor:
        return torch.stack(list(self.terms(embeddings, teacher_embeddings).values())).sum()

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None) -> dict[str, Tensor]:
        if labels is None:
            raise ValueError("DistillationSumLoss needs the teacher's embeddings as labels.")
        embeddings = embed_columns(self.model, sentence_features)
        labels = labels.detach()  # (batch, width): one teacher vector a row for every column, or one a column
        teacher = [labels] * len(embeddings) if labels.dim() == 2 else list(labels.unbind(1))
        return self.terms(embeddings, teacher)

    def get_config_dict(self) -> dict[str, Any]:
        return {"losses": list(self.losses), "projection_dim": self.projection_dim}

    @property
    def citation(self) -> str:
        return "\n".join(dict.fromkeys(loss.citation for loss in self.losses.values() if loss.citation))
