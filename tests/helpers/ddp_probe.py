"""Run the jtcse CLI and record what this process did, for tests that launch it under torchrun.

Usage: ``torchrun --nproc_per_node 2 tests/helpers/ddp_probe.py LOG_DIR train|simcse|distill ARGS...``.
Each rank appends JSON lines to ``LOG_DIR/rank<RANK>.jsonl``:

* ``train_begin``: the trainer's parallel mode, world size, process index, ``ddp_find_unused_parameters``;
* ``batch``: the distinct sentences (token ids without padding) of the training forwards of a step;
* ``step``: after every optimizer step, a digest of all trained parameters;
* ``trained``: the class of the trainer's wrapped model and the checkpoint it resumed from;
* ``save`` / ``summary``: every ``SentenceTransformer.save`` and ``run_summary.json`` write, with the path;
* ``teacher``: each call for the distillation targets, and whether it found them cached.

With ``PROBE_KILL_AFTER_SAVE=N`` every rank SIGKILLs itself once the checkpoint of step N is on disk
(all ranks past the save), as a crash would. With ``PROBE_SLOW_FINISH=S`` the ranks other than 0 wait S seconds before
they load the checkpoint a finished run is completed from (a slow rank). It observes through a ``TrainerCallback`` with a forward
pre-hook and wraps the writers; the command itself runs unchanged (``jtcse.cli.main``).
"""

from __future__ import annotations

import gc
import hashlib
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

LOG_DIR = Path(sys.argv[1])


def log(event: str, **fields) -> None:
    rank = os.environ.get("RANK", "0")
    with (LOG_DIR / f"rank{rank}.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"event": event, **fields}) + "\n")


def after_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """``patch(module)`` once the module ``name`` is imported: now if it is, else right after its import."""
    if name in sys.modules:
        patch(sys.modules[name])
        return

    class PatchOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(fullname)
            execute = spec.loader.exec_module

            def execute_and_patch(module: ModuleType) -> None:
                execute(module)
                patch(module)

            spec.loader.exec_module = execute_and_patch
            return spec

    sys.meta_path.insert(0, PatchOnImport())


def probe_callback():
    """A new ``TrainerCallback`` that logs the training (made when a training starts: see :func:`install`)."""
    import torch
    from transformers import TrainerCallback

    class Probe(TrainerCallback):
        def __init__(self) -> None:
            self.rows: set[str] = set()

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            log(
                "train_begin",
                parallel_mode=str(args.parallel_mode),
                world_size=args.world_size,
                process_index=args.process_index,
                find_unused=args.ddp_find_unused_parameters,
            )
            model.register_forward_pre_hook(self.record_rows)

        def record_rows(self, module, inputs):
            if not module.training:  # encodes outside the steps (model card, evaluator)
                return
            features = inputs[0]
            for ids, mask in zip(features["input_ids"], features["attention_mask"], strict=True):
                self.rows.add(hashlib.sha1(ids[mask.bool()].numpy().tobytes()).hexdigest()[:12])

        def on_save(self, args, state, control, **kwargs):
            if state.global_step == int(os.environ.get("PROBE_KILL_AFTER_SAVE", "0")):
                torch.distributed.barrier()  # every rank has written its part of the checkpoint
                os.kill(os.getpid(), signal.SIGKILL)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            log("batch", step=state.global_step, rows=sorted(self.rows))
            log("step", step=state.global_step, params=hashlib.sha1(flat.numpy().tobytes()).hexdigest())
            self.rows = set()

    return Probe()


def install() -> None:
    """Wrap the trainer call, ``SentenceTransformer.save``, the summary writer and the teacher targets. It imports
    nothing heavy itself: a launch that trains nothing (a finished run rerun) imports neither transformers nor
    sentence-transformers, and would otherwise pay seconds of imports for the probe alone."""
    import jtcse.training.teacher_cache as teacher_cache
    import jtcse.training.trainer_run as trainer_run

    train = trainer_run._train  # the runner's trainer call

    def observed_train(run, args):
        gc.freeze()  # what was loaded so far stays; the training's own objects are collected as usual
        gc.enable()
        run.callbacks = [*run.callbacks, probe_callback()]
        trainer, output = train(run, args)
        log("trained", wrapped=type(trainer.model_wrapped).__name__, resumed_from=run.resume_from)
        return trainer, output

    trainer_run._train = observed_train

    finish = trainer_run._finish_from_checkpoint

    def slow_finish(*args, **kwargs):
        if os.environ.get("RANK", "0") != "0":
            import time

            time.sleep(float(os.environ.get("PROBE_SLOW_FINISH", "0")))
        return finish(*args, **kwargs)

    trainer_run._finish_from_checkpoint = slow_finish

    def observe_saves(sentence_transformers: ModuleType) -> None:
        save = sentence_transformers.SentenceTransformer.save

        def observed_save(self, path, *args, **kwargs):
            log("save", path=str(path))
            return save(self, path, *args, **kwargs)

        sentence_transformers.SentenceTransformer.save = observed_save

    after_import("sentence_transformers", observe_saves)

    write_run_summary = trainer_run.write_run_summary

    def observed_write_run_summary(output_dir, summary):
        log("summary", path=str(output_dir))
        return write_run_summary(output_dir, summary)

    trainer_run.write_run_summary = observed_write_run_summary

    teacher_targets = teacher_cache.teacher_targets

    def observed_teacher_targets(*args, **kwargs):
        targets = teacher_targets(*args, **kwargs)
        log("teacher", cache_hit=targets.cache_hit)
        return targets

    teacher_cache.teacher_targets = observed_teacher_targets


if __name__ == "__main__":
    # The imports (torch, transformers, sentence-transformers) without the cyclic collector walking the growing heap
    # again and again (tests/conftest.py does the same while collecting): ~2 CPU-s a rank. On again, what was loaded
    # frozen, once the training starts (observed_train); a launch that trains nothing ends with it off.
    gc.disable()
    from jtcse.cli import main
    from jtcse.processes import quiet_replica

    quiet_replica()  # as jtcse.cli.main does, before the libraries are imported
    install()
    sys.argv = ["jtcse", *sys.argv[2:]]
    main()
