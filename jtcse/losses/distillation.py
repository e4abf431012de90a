"""Embedding-distillation objectives that sentence-transformers does not ship, in its ``EmbedDistillLoss`` form.

sentence-transformers has ``MSELoss`` (raw vectors) and ``EmbedDistillLoss`` (``mse``, ``l2``, ``cosine``, an
optional learned projection of the student to the teacher's width that is not saved with the model). These
two complete the set :mod:`jtcse.training.distill` offers; both take the cached teacher embeddings as the
``label`` column, as their parent does.
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.sentence_transformer.losses import EmbedDistillLoss
from torch import Tensor, nn


class NormalizedMSELoss(EmbedDistillLoss):
    r"""MSE between the L2-normalised student and teacher embeddings:

    .. math:: L = \frac{1}{n d} \sum_i \Big\lVert \frac{s_i}{\lVert s_i\rVert} - \frac{t_i}{\lVert t_i\rVert} \Big\rVert^2
              = \frac{2}{n d} \sum_i \big(1 - \cos(s_i, t_i)\big)

    so it ranks like ``EmbedDistillLoss(distance_metric="cosine")`` at a scale ``2/d`` (which matters to gradient
    clipping and learning-rate choice, not to the optimum). ``projection_dim``: a learned linear map of the student
    to the teacher's width before normalising (trained with the student, not saved with it).
    """

    def __init__(self, model, projection_dim: int | None = None) -> None:
        super().__init__(model, distance_metric="mse", projection_dim=projection_dim)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> Tensor:
        losses = []
        for student, teacher in zip(embeddings, teacher_embeddings):
            teacher = teacher.to(device=student.device, dtype=student.dtype)
            if self.projection is not None:
                student = self.projection(student)
            unit = nn.functional.normalize
            losses.append(nn.functional.mse_loss(unit(student, dim=-1), unit(teacher, dim=-1)))
        return torch.stack(losses).mean()

    def get_config_dict(self) -> dict[str, Any]:
        return {"projection_dim": self.projection_dim}


class SimilarityMatrixLoss(EmbedDistillLoss):
    r"""Match the student's in-batch cosine-similarity matrix to the teacher's:

    .. math:: L = \frac{1}{n(n-1)} \sum_{i \ne j} \big(\cos(s_i, s_j) - \cos(t_i, t_j)\big)^2

    over the ``n`` sentences of a batch. Only the teacher's cosines are imitated, never its coordinates, so the
    student keeps its own width and space (no projection: a teacher of any width, e.g. a concatenated ensemble,
    teaches a narrower student), and the objective is the quantity STS and retrieval use. Invariant to
    rotations and scalings of either space.
    """

    def __init__(self, model) -> None:
        super().__init__(model, distance_metric="mse", projection_dim=None)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], teacher_embeddings: list[Tensor]) -> Tensor:
        losses = []
        for student, teacher in zip(embeddings, teacher_embeddings):
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
