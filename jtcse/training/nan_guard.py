"""Stop training on a NaN/inf loss and name the step, without a host sync in every step."""

from __future__ import annotations

import torch
from torch import nn
from transformers import TrainerCallback

from jtcse.errors import JTCSEError


class NonFiniteLossGuard(TrainerCallback):
    """Watches a loss module (any sentence-transformers loss) through a forward hook.

    Each step the hook folds "is the total loss finite?" into a device tensor holding the first
    bad step (a ``torch.where``, no ``.item()``); the tensor is read only when the trainer is about
    to log, evaluate, save or stop, so a NaN is reported, by step, before a checkpoint is written.
    """

    def __init__(self, loss: nn.Module, hint: str = "") -> None:
        self._first_bad: torch.Tensor | None = None
        self._step = 0
        self.hint = hint
        self._handle = loss.register_forward_hook(self._record)

    def _record(self, module: nn.Module, args, output) -> None:
        values = output.values() if isinstance(output, dict) else [output]
        total = torch.stack([value.detach().float().sum() for value in values]).sum()
        bad = ~torch.isfinite(total)
        if self._first_bad is None:
            self._first_bad = torch.full((), -1, dtype=torch.long, device=total.device)
        self._first_bad = torch.where(bad & (self._first_bad < 0), self._step, self._first_bad)

    def first_bad_step(self) -> int | None:
        """The first step whose loss was NaN/inf, or None (this reads the device: call it rarely)."""
        if self._first_bad is None:
            return None
        step = int(self._first_bad)
        return step if step >= 0 else None

    def check(self) -> None:
        step = self.first_bad_step()
        if step is not None:
            raise JTCSEError(f"Training stopped: the loss became NaN or infinite at step {step}. {self.hint}".strip())

    def remove(self) -> None:
        self._handle.remove()

    def on_step_begin(self, args, state, control, **kwargs):
        self._step = state.global_step + 1

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_log or control.should_evaluate or control.should_save or control.should_training_stop:
            self.check()

    def on_train_end(self, args, state, control, **kwargs):
        self.check()
