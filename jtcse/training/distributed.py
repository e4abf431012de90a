"""The trainer's side of a multi-process launch (``torchrun``, ``accelerate launch``): one DDP job.

``SentenceTransformerTrainer`` trains the N processes as one DDP job (docs/distributed.md); which process is
which and what only rank 0 does (plan and open the output directory, cache the teacher, save the final model,
card and summary) is :mod:`jtcse.processes`. Here, what the trainer itself needs:

* the training-argument fields of a launch (:func:`training_arguments`: whole batches, CPU DDP over gloo);
* which parameters get no gradient under DDP (:func:`pooler_parameters`);
* a trainer whose checkpoints rank 0 alone writes (:func:`trainer_class`), and which samples no widget examples
  for the model card (:class:`~jtcse.training.card_callback.CardCallbackWithoutWidget`: jtcse writes its own card).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jtcse.processes import world_size


def training_arguments(use_cpu: bool) -> dict[str, Any]:
    """``SentenceTransformerTrainingArguments`` fields for this launch ({} in one process).

    * ``dataloader_drop_last``: every rank takes the same number of whole batches (an uneven last
      batch hangs DDP, and gathering across ranks needs equal shapes);
    * without CUDA (or with ``use_cpu``): ``use_cpu=True`` and the gloo backend. accelerate sets up
      multi-process training on the CPU only when told ``cpu=True``; otherwise every rank would train
      alone on all the data.
    """
    if world_size() == 1:
        return {}
    import torch

    arguments: dict[str, Any] = {"dataloader_drop_last": True}
    if use_cpu or not torch.cuda.is_available():
        arguments.update(use_cpu=True, ddp_backend="gloo")
    return arguments


def pooler_parameters(model) -> list:
    """The parameters of the transformers poolers (``model.pooler``) inside ``model``.

    A sentence-transformers CLS ``Pooling`` reads the token states and never the pooler, so these
    get no gradient unless a loss reads the pooler output (the twin's ICTM does); DDP then needs
    ``ddp_find_unused_parameters=True``.
    """
    from transformers import PreTrainedModel

    return [
        parameter
        for module in model.modules()
        if isinstance(module, PreTrainedModel) and getattr(module, "pooler", None) is not None
        for parameter in module.pooler.parameters()
        if parameter.requires_grad
    ]


@cache
def trainer_class():
    """``SentenceTransformerTrainer`` whose ``_save`` writes on the saving rank (rank 0) only.

    Upstream: transformers 5 moved the ``if not self.args.should_save: return`` guard from
    ``Trainer.save_model`` into ``Trainer._save``, and sentence-transformers' ``_save`` override
    (``sentence_transformers/base/trainer.py``, "we are the process zero, so we don't check") drops
    it, so every rank writes every checkpoint's model files into the same folder. This restores the
    guard; one process is unaffected (``should_save`` is True there). Its model-card callback samples no widget
    examples (:class:`~jtcse.training.card_callback.CardCallbackWithoutWidget`).
    """
    from sentence_transformers import SentenceTransformerTrainer

    from jtcse.training.card_callback import CardCallbackWithoutWidget

    class SentenceTransformerTrainerSavingOnce(SentenceTransformerTrainer):
        model_card_callback_class = CardCallbackWithoutWidget

        def _save(self, output_dir: str | None = None, state_dict=None) -> None:
            if self.args.should_save:
                super()._save(output_dir, state_dict=state_dict)

    return SentenceTransformerTrainerSavingOnce
