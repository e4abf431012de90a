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

**What it replaces.** OUTPUT is a :class:`~jtcse.output_paths.FolderOutput` whose record is ``summary.json``
(``written_by``, ``files``: every file jtcse wrote into OUTPUT, ``/``-separated, with its size and digest): a file there that it does not list
is never replaced, so the run is refused before any model is evaluated (:func:`results_output`). A summary of jtcse
before this layout (``{"model", "tasks"}``, ``OUTPUT/<task>.json``) is read as the record of the files it names.
Every write goes through :func:`write_results`.
"""

from __future__ import annotations

import json
from pathlib import Path

from jtcse.locking import atomic_path, atomic_write_json
from jtcse.output_paths import FolderOutput

SUMMARY = "summary.json"
WRITTEN_BY = "jtcse eval mteb"


def results_folder(meta) -> Path:
    """``<model>/<revision>``, relative to OUTPUT, of an mteb ``ModelMeta``."""
    return Path(meta.model_name_as_path()) / (meta.revision or "no_revision_available")


def planned_files(meta, task_names) -> list[str]:
    """The files (relative to OUTPUT, ``/``-separated) a run of ``task_names`` writes besides ``summary.json``."""
    folder = results_folder(meta)
    return [(folder / "model_meta.json").as_posix(), *((folder / f"{name}.json").as_posix() for name in task_names)]


def _before_the_layout(folder: Path) -> list[str] | None:
    """The task files a summary of jtcse before the results layout names (``{"model", "tasks"}``, each task's
    ``file``), which then stands for the record; ``None`` when ``folder`` holds no such summary."""
    try:
        data = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(data, dict) and set(data) == {"model", "tasks"} and isinstance(data["tasks"], dict)):
        return None
    return [str(entry["file"]) for entry in data["tasks"].values() if isinstance(entry, dict) and "file" in entry]


def results_output(output_dir: str | Path, inputs=(), cache_dir: str | Path | None = None) -> FolderOutput:
    """``output_dir`` as what ``jtcse eval mteb`` writes (``inputs``: the model, the local task files); its
    ``check()`` refuses (one line naming the file) an input, a file, a folder holding an input, and any file there
    that ``summary.json`` does not list. mteb's result cache (``cache_dir``) may be a folder in it: mteb's own."""
    cache = Path(cache_dir).resolve() if cache_dir is not None else None
    inside = cache is not None and Path(output_dir).resolve() in cache.parents
    parts = [cache.relative_to(Path(output_dir).resolve()).as_posix()] if inside else []
    return FolderOutput(output_dir, WRITTEN_BY, inputs=inputs, record=SUMMARY, parts=parts, earlier=_before_the_layout)


def write_results(out: FolderOutput, meta, task_results, summary: dict) -> dict:
    """Write each mteb ``TaskResult`` of ``task_results`` and ``model_meta.json`` into ``out`` (each entered in its
    record first, each file whole or not at all), then ``summary`` (plus ``written_by`` and ``files``: what it wrote,
    the earlier runs' files still there included) as ``summary.json``, last. Returns what ``summary.json`` holds."""
    written = planned_files(meta, [result.task_name for result in task_results]) if task_results else []
    out.add(*written)  # (``out`` was checked before anything ran, under the output's lock)
    folder = out.path / results_folder(meta)
    if task_results:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(folder / "model_meta.json", meta.to_dict())
    for result in task_results:
        with atomic_path(folder / f"{result.task_name}.json") as tmp:
            result.to_disk(tmp)
    out.seal(*out.files)  # each with its size and digest; one no longer there is dropped
    record = out.record()
    record.rest = {key: value for key, value in summary.items() if key not in ("written_by", "files")}
    record.save()
    return record.to_json()
