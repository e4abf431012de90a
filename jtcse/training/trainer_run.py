"""One trainer runner: every trainer (twin, SimCSE warm-up, distillation) describes its run as a
:class:`TrainerRun` and :func:`run_trainer` trains it the same way.

One settings rule (:class:`~jtcse.training.settings.TrainingSettings`), one set of trainer arguments
(:func:`~jtcse.training.arguments.build_training_args`), one set of output-directory rules
(:mod:`jtcse.training.run_dir`), one checkpoint policy (the last step, or the best by dev with ``checkpoint="best-dev"``; checkpoints deleted
after the final save unless ``keep_checkpoints``), one non-finite-loss guard (:func:`nan_guard`), one summary
schema (:mod:`jtcse.training.run_summary`, ``docs/runs.md``) and one curve plot (:mod:`jtcse.training.curves`).

Every trainer follows the same order, so that a mistake never costs a finished model: hold the output's
lock (:func:`jtcse.locking.locks_output`), check the settings and data, plan the output directory
(:func:`start_run`, reads only; a finished run of the same settings is a no-op), build the model and
loss (every option is checked here), and only then :func:`run_trainer` writes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jtcse import processes
from jtcse.errors import JTCSEError
from jtcse.locking import crash_point
from jtcse.output_paths import write_errors
from jtcse.training.arguments import DEV_EVALUATOR_NAME, DEV_METRIC, build_training_args
from jtcse.training.curves import CURVES_FILE, plot_training_curves
from jtcse.training.run_dir import (
    RUN_SUMMARY_NAME,
    TRAINER_STATE_FILE,
    OutputPlan,
    checkpoints_dir,
    discard_failed_start,
    open_output_dir,
    plan_output_dir,
    remove_checkpoints,
)
from jtcse.training.run_summary import facts_from_run_summary, run_summary, write_run_summary
from jtcse.training.settings import MIN_BATCH_SIZE, TrainingSettings, recorded_settings


def start_run(
    name: str,
    output_dir: str | Path,
    settings: Any,
    config: dict[str, Any],
    *,
    inputs: Sequence[object],
    resume: bool,
    overwrite: bool,
) -> OutputPlan:
    """The run's config (``stage``, ``config``, the trainer's recorded ``settings``
    (:func:`~jtcse.training.settings.recorded_settings`), the number of processes) and what to do with the output
    directory (:func:`~jtcse.training.run_dir.plan_output_dir`), which is never one of ``inputs`` (the models and
    files the stage reads) nor holds one. Reads only: nothing is written until :func:`run_trainer`. Under a
    multi-process launch rank 0 plans and every rank gets its plan (:func:`~jtcse.processes.run_on_main`). A trainer
    returns ``plan.summary`` at once when ``plan.finished``."""
    config = {"stage": name, **config, **recorded_settings(settings), "world_size": processes.world_size()}
    return processes.run_on_main(
        lambda: plan_output_dir(output_dir, config, resume=resume, overwrite=overwrite, inputs=inputs)
    )


def training_device(device: str | None, precision: str) -> str | None:
    """``device`` (``None``: the trainer's choice, the first visible GPU else the CPU) checked with the stage's
    ``precision`` before anything loads, by :mod:`jtcse.devices`' rules: a device this machine lacks, or a
    precision that device cannot run (fp16 off CUDA, bf16 on a GPU without it), is one line. The trainer trains
    on the first visible GPU, so ``cuda:N`` past 0 is refused with the way to choose that GPU. Returns
    ``device`` as given."""
    from jtcse.devices import check_precision, resolve_device

    resolved = resolve_device(device)
    kind, _, index = resolved.partition(":")
    if kind == "cuda" and index not in ("", "0") and processes.world_size() == 1:
        raise JTCSEError(
            f"training runs on the first visible GPU; to train on {resolved} run with CUDA_VISIBLE_DEVICES={index} "
            "and --device cuda."
        )
    check_precision(precision, resolved)
    return device


def require_negatives(count: int, what: str) -> None:
    """In-batch negatives need at least :data:`MIN_BATCH_SIZE` distinct training rows."""
    if count < MIN_BATCH_SIZE:
        raise JTCSEError(
            f"{what} needs at least {MIN_BATCH_SIZE} distinct training sentences for in-batch negatives (got {count})."
        )


def dev_evaluator(dev_file: str | Path | None, settings: TrainingSettings, batch_size: int = 64):
    """An :class:`~jtcse.evaluation.sts.STSDevEvaluator` for ``dev_file`` (``None`` without one), scored every
    ``eval_steps``; the stage keeps its best checkpoint by it when ``settings.checkpoint`` is ``best-dev``, which
    needs one (:meth:`~jtcse.training.settings.TrainingSettings.check_dev_file`)."""
    settings.check_dev_file(dev_file)
    if dev_file is None:
        return None
    from jtcse.evaluation.sts import STSDevEvaluator

    return STSDevEvaluator(dev_file, name=DEV_EVALUATOR_NAME, batch_size=batch_size)


@dataclass
class TrainerRun:
    """What one trainer run trains, on what, and how; run by :func:`run_trainer`.

    ``plan``: the output directory and the recorded config (from :func:`start_run`). ``model``: as
    loaded, at its own length (a warm-up's tower, a student, a twin: its tower I's; see
    :func:`jtcse.modeling.loading.load_model`). ``role`` names it in messages (``tower``, ``student``, ``twin``).
    ``model_info`` / ``data`` describe the model(s) and the data counts for the summary.
    ``device``: where it trains (``None``: the trainer's choice; checked by :func:`training_device`).
    ``trainer_overrides`` are further ``SentenceTransformerTrainingArguments`` fields.

    The one length rule of every trainer: making the run sets the model to its training length
    (``settings.max_seq_length``, clamped to the position table with a warning) and keeps its own length in
    ``own_length``; :func:`run_trainer` saves it at that own length again, so every checkpoint jtcse trains
    encodes as long inputs as the model it started from (docs/runs.md, "Lengths").
    """

    name: str
    plan: OutputPlan
    model: Any
    loss: Any
    train_dataset: Any
    settings: TrainingSettings
    role: str
    evaluator: Any = None
    model_info: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    use_no_duplicates_sampler: bool = False
    device: str | None = None
    trainer_overrides: dict[str, Any] = field(default_factory=dict)
    callbacks: Sequence[Any] = ()
    plot: bool = True
    own_length: int | None = field(init=False)

    def __post_init__(self) -> None:
        from jtcse.modeling.loading import set_max_seq_length

        self.own_length = self.model.max_seq_length
        set_max_seq_length(self.model, self.settings.max_seq_length, self.role)

    @property
    def output_dir(self) -> Path:
        return self.plan.output_dir

    @property
    def config(self) -> dict[str, Any]:
        return self.plan.config

    @property
    def resume_from(self) -> str | None:
        return self.plan.resume_from

    @property
    def precision(self) -> str:
        """The precision it trains at: ``settings.precision`` on its device, ``auto`` resolved
        (:func:`jtcse.devices.check_precision`)."""
        from jtcse.devices import check_precision

        return check_precision(self.settings.precision, self.device)


def _logging_steps(run: TrainerRun) -> int:
    """The given ``logging_steps``, or about ten logs a run (at most every 50 steps, at least every eval)."""
    s = run.settings
    if s.logging_steps is not None:
        return s.logging_steps
    per_epoch = max(1, len(run.train_dataset) // s.batch_size)
    total = s.max_steps if s.max_steps > 0 else math.ceil(per_epoch * s.epochs)
    return max(1, min(50, s.eval_steps, total // 10 or 1))


def run_trainer(run: TrainerRun) -> dict[str, Any]:
    """Train ``run``, save its model in ``run.output_dir`` and write ``run_summary.json``; return the summary.

    The output directory is first written here, after every check (:func:`start_run`, the model and
    loss built by the trainer, the training arguments). A fresh run that fails before its first
    complete checkpoint removes what it wrote (:func:`~jtcse.training.run_dir.discard_failed_start`).
    Under a multi-process launch every rank trains (one DDP job) and rank 0 alone writes: it opens the
    output directory and, after training, saves the model, card and summary while the others wait
    (:func:`~jtcse.processes.run_on_main`); every rank returns the summary.
    """
    args = _training_args(run)
    with write_failures(run.output_dir):
        processes.run_on_main(lambda: _open(run))
        try:
            trainer, progress = _train(run, args)
        except BaseException:
            if processes.is_main_process():  # no collective here: the other ranks may be anywhere
                discard_failed_start(run.plan)
            raise
        return processes.run_on_main(lambda: _save_and_summarise(run, trainer, progress))


_WRITE_FAILED = re.compile(
    r'IoError\(Os \{ code: \d+, kind: \w+, message: "(?P<why>[^"]+)"|I/O error: (?P<io>[^(\n]+?) \(os error \d+\)'
    r"|failed writing file (?P<file>\S+)|inline_container\.cc:\d+\] \. (?P<short>unexpected pos \d+ vs \d+)"
)
"""How safetensors (``SafetensorError``) and torch (``RuntimeError`` of ``PytorchStreamWriter``) say a write failed;
torch's writer says only ``unexpected pos N vs M`` when a write of ``torch.save`` (the optimizer's state) came out
short."""


@contextmanager
def write_failures(output_dir: Path):
    """A write that fails while training or saving (no space, file too large, quota, permission), from the OS, from
    safetensors or from torch, as one line naming the folder and saying what was kept
    (:func:`jtcse.output_paths.write_errors`)."""
    kept = (
        "The last complete checkpoint (if any) and the earlier model are kept: run the same command again once it "
        "can write, to go on from them."
    )
    with write_errors(output_dir, kept):
        try:
            yield
        except Exception as err:
            found = (
                _WRITE_FAILED.search(str(err)) if type(err).__name__ in ("SafetensorError", "RuntimeError") else None
            )
            if found is None:
                raise
            short = found["short"] and "a file came out short: no space left or a file-size limit"
            why = found["why"] or found["io"] or short or f"writing {found['file']} failed"
            raise JTCSEError(f"{output_dir}: a checkpoint or the model could not be written ({why}). {kept}") from None


TENSORBOARD_DIR = "runs"
"""TensorBoard's event files, in the run's folder (``report_to`` tensorboard): ``runs/<time>_<host>/`` a run."""


def _open(run: TrainerRun) -> None:
    """Open the output directory (:func:`open_output_dir`), entering TensorBoard's folder in its record when the run
    reports there."""
    open_output_dir(run.plan)
    if run.settings.report_to == "tensorboard":
        run.plan.output.add(TENSORBOARD_DIR)


def _log_into_run_folder(trainer, run: TrainerRun) -> None:
    """TensorBoard writes into the run's folder (``runs/<time>_<host>``, the trainer's own naming), not into
    ``checkpoints/`` (the trainer's ``output_dir``, deleted at the end)."""
    from transformers.integrations import TensorBoardCallback
    from transformers.integrations.integration_utils import default_logdir

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:  # $TENSORBOARD_LOGGING_DIR wins
            callback.logging_dir = str(Path(run.output_dir) / TENSORBOARD_DIR / Path(default_logdir()).name)


def nan_guard(loss, learning_rate: float, output_dir: str | Path):
    """A :class:`~jtcse.training.nan_guard.NonFiniteLossGuard` on ``loss`` whose error tells the user what to try."""
    from jtcse.training.nan_guard import NonFiniteLossGuard

    return NonFiniteLossGuard(
        loss,
        hint=f"Try a lower learning rate (now {learning_rate:g}); the last good checkpoint is kept in "
        f"{checkpoints_dir(output_dir)} for inspection.",
    )


def _train(run: TrainerRun, args):
    """Train with ``SentenceTransformerTrainer`` (checkpoints written by rank 0 alone,
    :func:`~jtcse.training.distributed.trainer_class`) under a :func:`nan_guard` on the loss, continuing from
    the plan's checkpoint when resuming; returns ``(trainer, progress)`` (a
    :class:`~jtcse.training.progress.RunProgress`: loss and time over the whole run). When that checkpoint
    already holds the last step (``plan.at_end``) the model and trainer state are taken from it without
    training (:func:`_finish_from_checkpoint`). The guard and the progress hook are removed from the loss
    however training ends."""
    from jtcse.training import distributed
    from jtcse.training.progress import RunProgress

    guard = nan_guard(run.loss, run.settings.learning_rate, run.output_dir)
    progress = RunProgress.from_checkpoint(run.loss, run.resume_from)
    trainer = distributed.trainer_class()(
        model=run.model,
        args=args,
        train_dataset=run.train_dataset,
        loss=run.loss,
        evaluator=run.evaluator,
        callbacks=[guard, progress, *run.callbacks],
    )
    _log_into_run_folder(trainer, run)
    try:
        if run.plan.at_end and run.resume_from is not None:
            _finish_from_checkpoint(trainer, run.resume_from, run.settings)
            processes.wait_for_every_rank()  # rank 0 saves and removes the checkpoint next: not while one reads it
        else:
            trainer.train(resume_from_checkpoint=run.resume_from)
    finally:
        guard.remove()
        progress.remove()
    return trainer, progress


def _finish_from_checkpoint(trainer, checkpoint: str | Path, settings: TrainingSettings) -> None:
    """Give ``trainer`` the state and the final model of a run whose last step ``checkpoint`` holds.

    ``Trainer.train`` resumed from such a checkpoint would run one step more; this loads what the end
    of training would have left instead: the best checkpoint by dev score when the run keeps it
    (``checkpoint`` best-dev), else the checkpoint's own weights.
    """
    from transformers import TrainerState

    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_FILE))
    best = trainer.state.best_model_checkpoint
    use_best = settings.kept_by_dev and best is not None and Path(best).is_dir()
    trainer._load_from_checkpoint(best if use_best else str(checkpoint))  # sentence-transformers' own loader


def _save_final_model(run: TrainerRun) -> float | None:
    """Score the model on the dev evaluator (``None`` without one) and save it to the output directory at
    its own length (``TrainerRun.own_length``: its config and its tokenizer's ``model_max_length`` say it) without
    training-only heads (:class:`~jtcse.losses.NITPHead`); returns the dev score.

    A finished run's summary there is removed first: from then until the new summary is written, the
    directory is an unfinished run, which a rerun completes from its last checkpoint. The model is saved into a
    scratch folder first and moved in entry by entry, each entered in the output's record
    (:meth:`~jtcse.output_paths.FolderOutput.moved_in`).
    """
    from jtcse.losses.nitp import remove_nitp_head
    from jtcse.modeling.loading import set_max_seq_length

    model, evaluator = run.model, run.evaluator
    final_dev = evaluator(model)[evaluator.primary_metric] if evaluator is not None else None
    if run.own_length is not None:
        set_max_seq_length(model, run.own_length, run.role)
    remove_nitp_head(model)
    (Path(run.output_dir) / RUN_SUMMARY_NAME).unlink(missing_ok=True)
    with run.plan.output.moved_in() as scratch:
        model.save(str(scratch))
    crash_point("final-save")
    return final_dev


def _save_and_summarise(run: TrainerRun, trainer, progress) -> dict[str, Any]:
    """Score and save the final model, plot the curves, write the card, the summary (last: the mark of a
    finished run) and remove the checkpoints; under a multi-process launch rank 0 alone does this
    (:func:`run_trainer`)."""
    output = run.plan.output
    training_length = run.model.max_seq_length
    final_dev = _save_final_model(run)
    history = trainer.state.log_history
    curves = plot_training_curves(history, DEV_METRIC, output.file(CURVES_FILE)) if run.plot else None
    if curves is None:
        output.drop(CURVES_FILE)  # nothing was logged: no plot
    summary = run_summary(
        run, trainer, progress, final_dev=final_dev, training_length=training_length, training_curves=curves
    )
    from jtcse.model_card import CARD_NAME, write_model_card  # imports sentence-transformers: not at CLI start-up

    output.add(CARD_NAME, RUN_SUMMARY_NAME)
    write_model_card(run.model, run.output_dir, facts_from_run_summary(summary))
    write_run_summary(run.output_dir, summary)  # last: the mark of a finished run
    if not run.settings.keep_checkpoints:
        remove_checkpoints(run.plan)
    output.seal()  # the size and digest of each file it wrote: one changed since is the user's
    return summary


def _training_args(run: TrainerRun):
    overrides = dict(run.trainer_overrides)
    if run.settings.group_by_length:  # batches of about one length, by the first text column's tokens
        from jtcse.training.length_batches import LengthBatches, token_lengths

        texts = run.train_dataset[run.train_dataset.column_names[0]]
        overrides["batch_sampler"] = LengthBatches(token_lengths(run.model.tokenizer, texts, run.model.max_seq_length))
    return build_training_args(
        run.output_dir,
        run.settings,
        has_dev=run.evaluator is not None,
        logging_steps=_logging_steps(run),
        use_no_duplicates_sampler=run.use_no_duplicates_sampler and not run.settings.group_by_length,
        device=run.device,
        **overrides,
    )
