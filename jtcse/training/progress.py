"""jtcse's own part of a trainer checkpoint: what a resumed run needs beyond the trainer's state.

The trainer's checkpoint holds the weights, optimizer, scheduler, data position and the torch/numpy/Python
RNG states. :class:`RunProgress` adds, in the same ``trainer_state.json`` (``stateful_callbacks``):

* the sum and count of the training loss over every step since step 0, and the training time, so the
  run summary's ``train_loss`` and ``seconds`` cover the whole run, not only the part after a resume;
* the training step, told to every loss module that draws random numbers of its own
  (``set_training_step``, e.g. the JTCSE loss's ICNCE direction), so they draw what an uninterrupted
  run draws.

The trainer asks a stateful callback for its state inside ``Trainer._save_checkpoint``, after the
weights, optimizer, scheduler and RNG states are on disk and before ``trainer_state.json`` (the file
that makes a checkpoint complete): that is where the crash point ``checkpoint-save`` sits.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from jtcse.locking import crash_point
from jtcse.training.run_dir import checkpoint_state


class RunProgress(TrainerCallback, ExportableState):
    """Whole-run loss and time, and the training step for the loss's own RNG (see the module docstring).

    ``loss``: the training loss module (watched through a forward hook: one device addition a step,
    read only at checkpoints and at the end). ``restored``: the ``attributes`` saved in the checkpoint
    the run resumes from (:meth:`from_checkpoint`).
    """

    def __init__(self, loss: nn.Module | None = None, restored: dict | None = None) -> None:
        restored = restored or {}
        self.loss_sum = float(restored.get("loss_sum", 0.0))
        self.loss_count = int(restored.get("loss_count", 0))
        self.seconds = float(restored.get("seconds", 0.0))
        self._pending: torch.Tensor | None = None
        self._pending_count = 0
        self._started: float | None = None
        self._stepped = [m for m in loss.modules() if hasattr(m, "set_training_step")] if loss is not None else []
        self._handle = loss.register_forward_hook(self._record) if loss is not None else None

    @classmethod
    def from_checkpoint(cls, loss: nn.Module, checkpoint: str | Path | None) -> RunProgress:
        """A :class:`RunProgress` on ``loss`` that continues the one saved in ``checkpoint`` (None: from step 0)."""
        saved = (checkpoint_state(checkpoint) or {}) if checkpoint is not None else {}
        return cls(loss, saved.get("stateful_callbacks", {}).get(cls.__name__, {}).get("attributes", {}))

    def _record(self, module: nn.Module, args, output) -> None:
        values = output.values() if isinstance(output, dict) else [output]
        total = torch.stack([value.detach().float().sum() for value in values]).sum()
        self._pending = total if self._pending is None else self._pending + total
        self._pending_count += 1

    def _fold(self) -> None:
        """Move the device-side loss sum and the elapsed time into the totals (one host sync)."""
        if self._pending is not None:
            self.loss_sum += float(self._pending)
            self.loss_count += self._pending_count
            self._pending, self._pending_count = None, 0
        if self._started is not None:
            now = time.perf_counter()
            self.seconds += now - self._started
            self._started = now

    @property
    def train_loss(self) -> float | None:
        """Mean training loss over every forward of the run (None before the first)."""
        return self.loss_sum / self.loss_count if self.loss_count else None

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._started = time.perf_counter()

    def on_step_begin(self, args, state, control, **kwargs):
        for module in self._stepped:
            module.set_training_step(state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        self._fold()
        self._started = None

    def state(self) -> dict:
        # The trainer also asks when it builds its state object, before training starts; only a call
        # during training is a checkpoint save.
        if self._started is not None:
            self._fold()
            crash_point("checkpoint-save")
        attributes = {"loss_sum": self.loss_sum, "loss_count": self.loss_count, "seconds": round(self.seconds, 3)}
        return {"args": {}, "attributes": attributes}
