"""MTEB runs: named tasks from the ``mteb`` registry and STS tasks defined from local files.

The default set is the paper's extra STS evaluation: the English parts of STS17, STS22.v2 and
STSBenchmarkMultilingualSTS (test split). Each task runs on its own; a task whose data cannot be
loaded (no network, no local copy in the Hugging Face cache) is recorded with its error instead of
stopping the run. Results go to ``<out>/<task>.json`` (MTEB's ``TaskResult``) and ``<out>/summary.json``.

Each model is named by its path and revised by a content hash of its weights and module settings
(:func:`model_revision`), and every local task's dataset revision is a hash of its file, so MTEB's
result cache hands a run only results computed from the same weights on the same data.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import locks_output
from jtcse.output_paths import FolderOutput

#: (task name, hf subsets, eval splits) of the default run.
DEFAULT_MTEB_TASKS: tuple[str, ...] = ("STS17:en-en", "STS22.v2:en", "STSBenchmarkMultilingualSTS:en")
_DEFAULT_SPLITS = {"STSBenchmarkMultilingualSTS": ["test"]}


def _read_local_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    from jtcse.evaluation.sts import read_stsb_file

    if not path.is_file():
        raise JTCSEError(f"local MTEB task file not found: {path}")
    with path.open(encoding="utf-8-sig", newline="") as handle:  # (a byte order mark is not the header)
        first = handle.readline()
    if {"sentence1", "sentence2", "score"} <= set(re.split(r"[\t,]", first.strip())):
        delimiter = "\t" if "\t" in first else ","
        s1: list[str] = []
        s2: list[str] = []
        scores: list[float] = []
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for line_no, row in enumerate(csv.DictReader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE), start=2):
                try:
                    scores.append(float(row["score"]))
                except (TypeError, ValueError):
                    raise JTCSEError(f"{path}: line {line_no}: score {row.get('score')!r} is not a number") from None
                s1.append(row["sentence1"])
                s2.append(row["sentence2"])
        if not scores:
            raise JTCSEError(f"{path} has a header but no pairs")
        return s1, s2, scores
    pairs = read_stsb_file(path)  # STS-B layout: genre, file, year, id, score, s1, s2
    return pairs.sentences1, pairs.sentences2, [float(s) for s in pairs.scores]


def local_sts_task(path: str | Path, name: str | None = None):
    """An MTEB STS task (an ``AbsTaskSTS`` instance) whose test split is read from ``path``.

    The file is either a table with a ``sentence1, sentence2, score`` header (tab- or comma-separated)
    or an STS-B-format file. Nothing is downloaded.
    """
    from datasets import Dataset, DatasetDict
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    path = Path(path)
    s1, s2, scores = _read_local_pairs(path)
    task_name = name or "Local_" + (re.sub(r"[^0-9A-Za-z_.-]+", "_", path.stem) or "STS")
    metadata = TaskMetadata(
        name=task_name,
        description=f"STS pairs read from the local file {path.name}.",
        dataset={"path": str(path), "revision": hashlib.sha256(path.read_bytes()).hexdigest()[:16]},
        type="STS",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="cosine_spearman",
    )

    def load_data(self, num_proc=None, **kwargs) -> None:
        if self.data_loaded:
            return
        self.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": s1, "sentence2": s2, "score": scores})})
        self.data_loaded = True

    cls = type(
        task_name,
        (AbsTaskSTS,),
        {
            "metadata": metadata,
            "load_data": load_data,
            "min_score": min(scores),
            "max_score": max(scores),
        },
    )
    return cls()


def _registry_task(spec: str):
    import mteb

    name, _, subset = spec.partition(":")
    try:
        return mteb.get_task(name, hf_subsets=[subset] if subset else None, eval_splits=_DEFAULT_SPLITS.get(name))
    except (KeyError, ValueError) as err:
        raise JTCSEError(f"unknown MTEB task {name!r}: {err}") from None


def model_revision(model) -> str:
    """Content hash (16 hex digits) of a SentenceTransformer's weights and the module settings that shape
    its embeddings (module types, their configs, ``max_seq_length``): MTEB's revision of the model."""
    import torch

    digest = hashlib.sha256()
    settings = [
        [type(module).__name__, module.get_config_dict() if hasattr(module, "get_config_dict") else None]
        for module in model
    ]
    digest.update(json.dumps([settings, model.max_seq_length], sort_keys=True, default=str, allow_nan=False).encode())
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def model_name(name_or_path: str | Path) -> str:
    """MTEB's name of a model: the absolute path of a local checkpoint, else the hub name as given."""
    path = Path(name_or_path)
    return str(path.resolve()) if path.exists() else str(name_or_path)


def _mteb_model(model, name: str):
    """``model`` wrapped for MTEB, named ``name`` and revised by :func:`model_revision`."""
    from mteb.models import SentenceTransformerEncoderWrapper

    wrapped = SentenceTransformerEncoderWrapper(model)
    wrapped.mteb_model_meta = wrapped.mteb_model_meta.model_copy(
        update={"name": name, "revision": model_revision(model)}
    )
    return wrapped


@locks_output("output_dir")
def run_mteb(
    model,
    tasks,
    output_dir: str | Path,
    local_tasks=(),
    batch_size: int = 64,
    *,
    name: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> dict:
    """Run each task (registry names, optionally ``NAME:SUBSET``, plus local STS files) on ``model``.

    ``name``: the model's path or hub name (:func:`model_name`; default: what the model card says).
    ``cache_dir``: MTEB's result cache (default: MTEB's own, ``$MTEB_CACHE`` or ``~/.cache/mteb``); a
    cached result is reused only for the same name, weights (:func:`model_revision`) and task data.
    Returns the summary written to ``output_dir/summary.json``:
    ``{"model": {"name", "revision"}, "tasks": {name: {"main_score", "metric", "file"} | {"error"}}}``.
    """
    import mteb

    out = FolderOutput(output_dir, "jtcse eval mteb", inputs=local_tasks)  # (:mod:`jtcse.output_paths`)
    out.check()
    out.path.mkdir(parents=True, exist_ok=True)
    if model is not None:
        model = _mteb_model(model, model_name(name) if name is not None else _card_name(model))
    cache = mteb.ResultCache(cache_dir) if model is not None else None
    jobs = []
    for spec in tasks:
        jobs.append((spec, lambda spec=spec: _registry_task(spec)))
    for path in local_tasks:
        jobs.append((Path(path).name, lambda path=path: local_sts_task(path)))

    meta = model.mteb_model_meta if model is not None else None
    summary: dict = {"model": {"name": meta.name, "revision": meta.revision} if meta else None, "tasks": {}}
    for _label, make_task in jobs:
        task = make_task()  # bad names / unreadable local files are user mistakes: raise
        name = task.metadata.name
        cached = cache.load_task_result(name, meta) if cache is not None else None
        stale = cached is not None and cached.dataset_revision != task.metadata.revision
        try:
            result = mteb.evaluate(
                model,
                task,
                cache=cache,
                overwrite_strategy="always" if stale else "only-missing",
                encode_kwargs={"batch_size": batch_size},
                show_progress_bar=False,
                raise_error=True,
            )
        except Exception as err:  # noqa: BLE001 - a task that cannot run (offline data) is reported, not fatal
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            summary["tasks"][name] = {"error": f"{type(err).__name__}: {message}"}
            continue
        task_result = result.task_results[0]
        file = out.path / f"{name}.json"
        with out.atomic(file.name) as tmp:
            task_result.to_disk(tmp)
        summary["tasks"][name] = {
            "main_score": float(task_result.get_score()),
            "metric": task.metadata.main_score,
            "file": file.name,
        }
    out.write_json("summary.json", summary)
    return summary


def _card_name(model) -> str:
    """A model's name when no path is given: its model card's name or base model, else ``"unnamed"``."""
    card = model.model_card_data
    return card.model_name or card.base_model or "unnamed"
