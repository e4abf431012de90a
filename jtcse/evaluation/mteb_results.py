"""The results folder of ``jtcse eval mteb``, laid out as mteb's own results folder, and the one place that writes it.

::

    OUTPUT/
      summary.json                          the run: model, each task's main score or why it did not run
      <model>/<revision>/<Task>.json        mteb's TaskResult of each task that ran
      <model>/<revision>/model_meta.json    mteb's ModelMeta of the model

``<model>`` is mteb's ``ModelMeta.model_name_as_path()`` of the model's name, ``<revision>`` its weights hash
(:func:`jtcse.evaluation.mteb_runner.model_revision`). It is the layout of the ``results/`` folder of mteb's cache
and of the embeddings-benchmark/results repository, so mteb reads a folder named ``results``:
``mteb.ResultCache(PARENT).load_results()`` for ``-o PARENT/results``.

**What it replaces.** ``summary.json`` lists every file jtcse wrote into OUTPUT (``files``); a file already there is
replaced only when that list names it, so a file of the user's is never overwritten: the run is refused before any
model is evaluated (:func:`check_results_writable`). Every write goes through :func:`write_results`.
"""

from __future__ import annotations

import json
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path, atomic_write_json
from jtcse.output_paths import check_output_apart

SUMMARY = "summary.json"
WRITTEN_BY = "jtcse eval mteb"


def results_folder(meta) -> Path:
    """``<model>/<revision>``, relative to OUTPUT, of an mteb ``ModelMeta``."""
    return Path(meta.model_name_as_path()) / (meta.revision or "no_revision_available")


def planned_files(meta, task_names) -> list[str]:
    """The files (relative to OUTPUT, ``/``-separated) a run of ``task_names`` writes besides ``summary.json``."""
    folder = results_folder(meta)
    return [(folder / "model_meta.json").as_posix(), *((folder / f"{name}.json").as_posix() for name in task_names)]


def _written_before(output_dir: Path) -> list[str]:
    """The files an earlier run recorded in ``summary.json``; a ``summary.json`` jtcse did not write is refused."""
    summary = output_dir / SUMMARY
    if not summary.exists():
        return []
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if isinstance(data, dict) and data.get("written_by") == WRITTEN_BY:
        return [str(name) for name in data.get("files", [])]
    if isinstance(data, dict) and set(data) == {"model", "tasks"}:
        return []  # a summary of jtcse before the results layout (OUTPUT/<task>.json, never written again)
    raise JTCSEError(f"{summary} was not written by {WRITTEN_BY}, and it is never replaced: give another -o/--output.")


def check_results_writable(output_dir: str | Path, files, inputs=()) -> list[str]:
    """Refuse (one line naming the file) unless every file of ``files`` (relative to ``output_dir``) and
    ``summary.json`` may be written: not an input of the run (``inputs``: the model, the local task files), and
    absent or written by an earlier run. Returns the files the earlier runs wrote (:func:`write_results` keeps them
    listed)."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise JTCSEError(f"{output_dir} is a file; eval mteb writes a results folder there: give a folder as -o.")
    check_output_apart([output_dir / SUMMARY, *(output_dir / name for name in files)], inputs)
    earlier = _written_before(output_dir)
    for name in files:
        if (output_dir / name).exists() and name not in earlier:
            raise JTCSEError(
                f"{output_dir / name} exists and was not written by {WRITTEN_BY}; it is never replaced: "
                "give another -o/--output."
            )
    return earlier


def write_results(output_dir: str | Path, meta, task_results, summary: dict, inputs=()) -> dict:
    """Write each mteb ``TaskResult`` of ``task_results``, ``model_meta.json`` and ``summary`` (plus ``written_by``
    and ``files``) into ``output_dir``, each file whole or not at all; ``summary.json`` last. Returns what
    ``summary.json`` holds."""
    output_dir = Path(output_dir)
    written = planned_files(meta, [result.task_name for result in task_results]) if task_results else []
    earlier = check_results_writable(output_dir, written, inputs)
    folder = output_dir / results_folder(meta)
    if task_results:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "model_meta.json", meta.to_dict())
    output_dir.mkdir(parents=True, exist_ok=True)
    for result in task_results:
        with atomic_path(folder / f"{result.task_name}.json") as tmp:
            result.to_disk(tmp)
    files = sorted({name for name in earlier if (output_dir / name).is_file()} | set(written))
    summary = {"written_by": WRITTEN_BY, **summary, "files": files}
    atomic_write_json(output_dir / SUMMARY, summary)
    return summary
