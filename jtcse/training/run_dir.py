"""A training run's output directory: its layout, and whether a run there starts, resumes or is already finished.

Rules shared by ``jtcse simcse``, ``jtcse distill`` and ``jtcse train`` (``docs/runs.md``). Layout::

    <output_dir>/modules.json, ...                the final model
    <output_dir>/run_summary.json                 written last: with modules.json, the mark of a finished run
    <output_dir>/checkpoints/jtcse_run_config.json  the settings of the run that wrote the checkpoints
    <output_dir>/checkpoints/checkpoint-<step>/   trainer checkpoints (complete once trainer_state.json is there)

:func:`plan_output_dir` decides (reading only), :func:`open_output_dir` carries the plan out once the model
and loss are built, :func:`discard_failed_start` undoes a fresh run that failed before its first checkpoint.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError, SettingError
from jtcse.locking import atomic_write_json, json_text
from jtcse.output_paths import RECORD, FolderOutput, check_output_apart, missing_entries

logger = logging.getLogger(__name__)

CHECKPOINTS_SUBDIR = "checkpoints"
RUN_SUMMARY_NAME = "run_summary.json"
RUN_CONFIG_NAME = "jtcse_run_config.json"
TRAINER_STATE_FILE = "trainer_state.json"
"""Written last into a trainer checkpoint (``Trainer._save_checkpoint``): its presence marks a complete one."""
LENGTH_KEYS = ("max_steps", "epochs")
"""Settings that may change when a run resumes: they only say how long to train."""
LAUNCH_KEYS = ("world_size",)
"""How a run was launched, not what it trained (its batch per process and gathering are settings of their own):
a finished run is judged without them, so a stage trained under torchrun counts as done for one process that
asks for the same settings; a run is only resumed by as many processes as wrote its checkpoints."""


def checkpoints_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / CHECKPOINTS_SUBDIR


WRITERS = {"simcse": "jtcse simcse", "twin": "jtcse train", "distill": "jtcse distill"}
"""The command each stage's output folder is written by (its record's ``written_by``, :mod:`jtcse.output_paths`)."""


def stage_output(output_dir: str | Path, config: dict[str, Any], inputs: Sequence[object] = ()) -> FolderOutput:
    """The output folder of the stage ``config["stage"]`` (:class:`~jtcse.output_paths.FolderOutput`), reading
    ``inputs`` (models, corpus, pairs, dev file)."""
    return FolderOutput(output_dir, WRITERS.get(config.get("stage"), "jtcse train"), inputs=inputs)


def is_finished(output_dir: str | Path) -> bool:
    """True when ``output_dir`` holds a completed run: a saved model, its run summary, and every file its run
    wrote (its record lists them: :func:`~jtcse.output_paths.missing_entries`)."""
    output_dir = Path(output_dir)
    saved = (output_dir / RUN_SUMMARY_NAME).is_file() and (output_dir / "modules.json").is_file()
    return saved and not missing_entries(output_dir)


def unfinished_because(output_dir: str | Path) -> str | None:
    """Why a folder holding a run summary is not a finished run (a file its run wrote is missing), else ``None``."""
    output_dir = Path(output_dir)
    if not (output_dir / RUN_SUMMARY_NAME).is_file():
        return None
    missing = missing_entries(output_dir) or [n for n in ("modules.json",) if not (output_dir / n).exists()]
    if not missing:
        return None
    return f"{', '.join(missing)}, which its run wrote, {'is' if len(missing) == 1 else 'are'} missing (deleted?)"


def finished_summary(output_dir: str | Path) -> dict[str, Any] | None:
    """The run summary of the finished run in ``output_dir`` (:func:`is_finished`), else ``None``."""
    return _summary(output_dir) if is_finished(output_dir) else None


def _summary(output_dir: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(output_dir) / RUN_SUMMARY_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def checkpoint_state(checkpoint: str | Path) -> dict[str, Any] | None:
    """The trainer state of a checkpoint folder, or ``None`` when the checkpoint is incomplete.

    ``Trainer._save_checkpoint`` writes ``trainer_state.json`` last (after the weights, optimizer,
    scheduler and RNG states), so a folder whose state file is missing or unreadable was cut off
    while being saved.
    """
    try:
        state = json.loads((Path(checkpoint) / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("global_step"), int) else None


def newest_checkpoint(output_dir: str | Path) -> tuple[Path | None, dict[str, Any] | None, list[Path]]:
    """``(checkpoint, its trainer state, incomplete checkpoints newer than it)`` in ``<output_dir>/checkpoints``;
    ``(None, None, [...])`` when no checkpoint there is complete."""

    def step(path: Path) -> int:
        return int(path.name.rsplit("-", 1)[1])

    folders = [
        p for p in checkpoints_dir(output_dir).glob("checkpoint-*") if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()
    ]
    partial: list[Path] = []
    for folder in sorted(folders, key=step, reverse=True):
        state = checkpoint_state(folder)
        if state is not None:
            return folder, state, partial
        partial.append(folder)
    return None, None, partial


FRESH, RESUME, FINISHED = "fresh", "resume", "finished"


@dataclass(frozen=True)
class OutputPlan:
    """What a stage does with its output directory, decided by :func:`plan_output_dir` before anything is
    loaded or written, and carried out by :func:`open_output_dir` once the model and loss are built.

    ``action``: ``fresh`` (train from step 0), ``resume`` (continue from ``resume_from``) or ``finished``
    (the directory already holds this very run: nothing to do; ``summary`` is its run summary).
    ``at_end``: ``resume_from`` already holds the run's last step (a kill came before the final save).
    ``partial``: incomplete checkpoints, removed when the directory is opened. ``existed`` / ``recorded``: whether
    the directory and its record were there, so a run that fails before its first checkpoint removes only what it
    created. ``output``: the folder as an output (:class:`~jtcse.output_paths.FolderOutput`): what is written
    there is entered in its record first.
    """

    output_dir: Path
    config: dict[str, Any]
    action: str = FRESH
    resume_from: str | None = None
    at_end: bool = False
    partial: tuple[Path, ...] = ()
    existed: bool = True
    summary: dict[str, Any] | None = None
    recorded: bool = True
    output: FolderOutput | None = None

    def __post_init__(self) -> None:
        if self.output is None:
            object.__setattr__(self, "output", stage_output(self.output_dir, self.config))

    @property
    def finished(self) -> bool:
        return self.action == FINISHED


def _as_recorded(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as it reads back from JSON (tuples become lists), so a recorded config compares equal."""
    return json.loads(json_text(config, where="the run's settings"))


def _differences(previous: dict[str, Any], config: dict[str, Any], ignore: Sequence[str] = ()) -> list[str]:
    return sorted(k for k in (set(previous) | set(config)) - set(ignore) if previous.get(k) != config.get(k))


RERUN = "rerun"
"""The field of a refusal that says how to train a folder again (``pass --overwrite to replace it``): whoever runs
the trainer under other options says it in its own words (:meth:`~jtcse.errors.SettingError.renamed`; a pipeline's
stage: remove its folder)."""


def _changes(previous: dict[str, Any], config: dict[str, Any], ignore: Sequence[str] = ()) -> tuple[str, list[str]]:
    """``(text, keys)``: what differs, as a :class:`~jtcse.errors.SettingError` template naming each setting by its
    key (a command names it by its option), with the value it ran with and the one asked for now; the settings
    first (``with other settings (learning_rate 1e-05 -> 0.0001)``), then the inputs, whose fingerprints differ
    (``from inputs that have changed since (teacher "sha256:..." -> "sha256:...")``: a file edited, a model trained
    again)."""
    from jtcse.output_paths import is_fingerprint

    def shown(value: Any) -> str:
        text = json_text(value, indent=None)
        return (text if len(text) <= 80 else text[:77] + "...").replace("{", "{{").replace("}", "}}")

    changed = _differences(previous, config, ignore)
    named = [k for k in changed if k.isidentifier()]
    inputs = [k for k in changed if is_fingerprint(previous.get(k)) or is_fingerprint(config.get(k))]

    def listed(keys: list[str]) -> str:
        return ", ".join(
            (f"{{{k}}}" if k in named else shown(k)) + f" {shown(previous.get(k))} -> {shown(config.get(k))}"
            for k in keys
        )

    settings = [k for k in changed if k not in inputs]
    parts = [f"with other settings ({listed(settings)})"] if settings else []
    if inputs:
        parts.append(f"from inputs that have changed since ({listed(inputs)})")
    return " and ".join(parts), named


def finished_run(
    output_dir: str | Path, config: dict[str, Any], *, model: bool = True, rerun: bool = False
) -> dict[str, Any] | None:
    """The one rule for a finished run (:func:`plan_output_dir` applies it to a trainer's folder, the pipeline to
    the stages it records itself): the summary in ``output_dir`` when a finished run there recorded this very
    ``config``; ``None`` when none finished (or, ``rerun``, when one finished with other settings, to be run
    again); a ``JTCSEError`` naming each setting that differs, old and new value, otherwise. ``model``: a finished
    run also saved a model there."""
    config = _as_recorded(config)
    finished = finished_summary(output_dir) if model else _summary(output_dir)
    recorded = (finished or {}).get("config") or {}
    if finished is None or not _differences(recorded, config, LAUNCH_KEYS):
        return finished
    if rerun:
        return None
    why, keys = _changes(recorded, config, LAUNCH_KEYS)
    raise SettingError(
        "{_folder} finished " + why + "; {" + RERUN + "}, or use another -o/--output.",
        {**{k: k for k in keys}, RERUN: "remove that folder to run it again"},
        _folder=output_dir,
    )


def plan_output_dir(
    output_dir: str | Path, config: dict[str, Any], *, resume: bool, overwrite: bool, inputs: Sequence[object] = ()
) -> OutputPlan:
    """Decide what to do with ``output_dir``; reads only (:func:`open_output_dir` writes).

    The rules, shared by ``jtcse simcse``, ``jtcse distill`` and ``jtcse train`` (``docs/runs.md``):

    * The directory is never one of ``inputs`` (the models, corpus, pairs and dev file the stage reads) nor holds
      one, ``--overwrite`` or not; a run that will write checks the directory as an output
      (:meth:`~jtcse.output_paths.FolderOutput.check`: it holds nothing that jtcse did not write).
    * The directory holds a finished run with this very ``config``: nothing to do (``finished``),
      unless ``overwrite``.
    * ``resume`` and a complete trainer checkpoint in ``<output_dir>/checkpoints``: continue from the
      newest complete one (incomplete ones, cut off by a kill while being saved, are reported and
      skipped). The recorded config must match this one except for the training length
      (:data:`LENGTH_KEYS`), which may grow: a finished run whose checkpoints were kept trains further.
    * A finished run otherwise is refused unless ``overwrite``; with it, the old model and summary stay
      until the new model is saved (the stage runner's final save).
    * Otherwise training starts from step 0 (stale checkpoints are removed when the directory is opened).
    """
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise JTCSEError(f"{output_dir} is a file; -o/--output names the folder the model is written to.")
    check_output_apart(output_dir, inputs)  # first: the refusal says the folder is an input, not what differs
    config = _as_recorded(config)
    output = stage_output(output_dir, config, inputs)
    finished = finished_summary(output_dir)
    done = None if overwrite else finished_run(output_dir, config, rerun=True)
    if done is not None:
        logger.warning(
            "%s already holds this finished run (%s steps, same settings); nothing to do. "
            "To train it again: --overwrite (a pipeline's stage: remove its folder).",
            output_dir,
            done.get("steps"),
        )
        return OutputPlan(output_dir, config, FINISHED, summary=done, output=output)
    output.check()  # it will write: nothing there that jtcse did not write
    if (damage := unfinished_because(output_dir)) is not None:
        logger.warning("%s is not a finished run: %s; training it again.", output_dir, damage)
    if resume and not overwrite:
        checkpoint, state, partial = newest_checkpoint(output_dir)
        if partial:
            logger.warning(
                "Skipping incomplete checkpoint(s) %s in %s (cut off while being saved); %s.",
                ", ".join(p.name for p in partial),
                checkpoints_dir(output_dir),
                f"resuming from {checkpoint.name}" if checkpoint else "starting from step 0",
            )
        if checkpoint is not None:
            return replace(_resume_plan(output_dir, config, checkpoint, state, tuple(partial), finished), output=output)
    if finished is not None and not overwrite:
        changed = _differences(finished.get("config") or {}, config, LAUNCH_KEYS)
        if changed and not set(changed) - set(LENGTH_KEYS):
            why = "its checkpoints were deleted, so it cannot train further (keep them with {keep_checkpoints})"
            keys = {"keep_checkpoints": "--keep-checkpoints"}
        else:
            why, named = _changes(finished.get("config") or {}, config, LAUNCH_KEYS)
            keys = {k: k for k in named}
        again = "pass --overwrite to replace it (the old model stays until the new one is saved)"
        raise SettingError(
            "{_folder} already holds a finished run, " + why + ". Choose another -o/--output, or {" + RERUN + "}.",
            {**keys, RERUN: again},
            _folder=output_dir,
        )
    recorded = output.record_path.is_file()
    return OutputPlan(output_dir, config, FRESH, existed=output_dir.exists(), recorded=recorded, output=output)


def _resume_plan(output_dir, config, checkpoint, state, partial, finished) -> OutputPlan:
    """The plan to continue from ``checkpoint`` (trainer ``state``), after checking the recorded settings."""
    config_path = checkpoints_dir(output_dir) / RUN_CONFIG_NAME
    previous = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    length_changed = False
    if previous is not None:
        if _differences(previous, config, ignore=LENGTH_KEYS):
            why, named = _changes(previous, config, LENGTH_KEYS)
            again = f"pass {'--overwrite' if finished else '--no-resume'} to start over"
            raise SettingError(
                "{_folder} holds a run " + why + ". Rerun with the same settings to resume, or {" + RERUN + "}.",
                {**{k: k for k in named}, RERUN: again},
                _folder=output_dir,
            )
        length_changed = any(previous.get(k) != config.get(k) for k in LENGTH_KEYS)
    step, max_steps = state["global_step"], config.get("max_steps", -1)
    if length_changed and isinstance(max_steps, int) and 0 < max_steps <= step:
        raise SettingError(
            "{_folder} holds a checkpoint at step {_step}; {max_steps} {_max} would train no further. Give a larger "
            "{max_steps}, or {" + RERUN + "}.",
            {"max_steps": "--max-steps", RERUN: "pass --overwrite to start over"},
            _folder=output_dir,
            _step=step,
            _max=max_steps,
        )
    if finished is not None:
        logger.warning(
            "Training the finished run in %s further from step %d. Its learning-rate schedule ended with that "
            "step: the first step after the resume runs at the rate it ended with (0 for the default linear "
            "decay), the next ones follow the schedule for the new length.",
            output_dir,
            step,
        )
    at_end = not length_changed and step >= state.get("max_steps", step + 1)
    return OutputPlan(output_dir, config, RESUME, resume_from=str(checkpoint), at_end=at_end, partial=partial)


def open_output_dir(plan: OutputPlan) -> None:
    """Carry out ``plan`` (not for ``finished``): the stage's first write, once its model and loss are built.

    Creates the directory with its record (which lists ``checkpoints/`` from now on), removes incomplete
    checkpoints (resuming) or every old checkpoint (fresh start) and records the config in
    ``checkpoints/jtcse_run_config.json``.
    """
    ckpt_dir = checkpoints_dir(plan.output_dir)
    stale = plan.partial if plan.action == RESUME else ckpt_dir.glob("checkpoint-*")
    for folder in list(stale):  # what the record proves is jtcse's (a file of the user's in one stays)
        plan.output.remove(Path(folder).relative_to(plan.output_dir).as_posix())
    plan.output.add(CHECKPOINTS_SUBDIR)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(ckpt_dir / RUN_CONFIG_NAME, plan.config)


def discard_failed_start(plan: OutputPlan) -> None:
    """After a fresh run failed before its first complete checkpoint, remove what it created: the output
    is as it was (a run with a checkpoint is kept, to resume or inspect)."""
    if plan.action != FRESH or newest_checkpoint(plan.output_dir)[0] is not None:
        return
    if not plan.existed:
        shutil.rmtree(plan.output_dir, ignore_errors=True)
        return
    plan.output.remove(CHECKPOINTS_SUBDIR)
    if not plan.recorded and not plan.output.files:  # an empty folder before: no record left in it either
        (plan.output_dir / RECORD).unlink(missing_ok=True)


def remove_checkpoints(plan: OutputPlan) -> None:
    """Drop trainer checkpoints once the final model is saved (they hold optimizer state, 3× the model)."""
    plan.output.remove(CHECKPOINTS_SUBDIR)
