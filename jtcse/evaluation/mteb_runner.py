"""MTEB runs as mteb users run them: named tasks from the ``mteb`` registry, benchmarks by name
(``mteb.get_benchmark``), and tasks of every type defined from local files (:mod:`jtcse.evaluation.mteb_local_tasks`).

The default set is the paper's extra STS evaluation: the English parts of STS17, STS22.v2 and
STSBenchmarkMultilingualSTS (test split). Each task runs on its own through ``mteb.evaluate``; a task whose data
cannot be loaded (no network, no local copy in the Hugging Face cache) is recorded with its error instead of
stopping the run. Results go to mteb's results layout, ``<out>/<model>/<revision>/<Task>.json`` (mteb's
``TaskResult``), plus ``<out>/summary.json`` (:mod:`jtcse.evaluation.mteb_results`).

Each model is named by its path and revised by a content hash of its weights and module settings
(:func:`model_revision`), and every local task's dataset revision is a hash of its files, so MTEB's
result cache hands a run only results computed from the same weights on the same data.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import locks_output

#: (task name, hf subsets, eval splits) of the default run.
DEFAULT_MTEB_TASKS: tuple[str, ...] = ("STS17:en-en", "STS22.v2:en", "STSBenchmarkMultilingualSTS:en")
_DEFAULT_SPLITS = {"STSBenchmarkMultilingualSTS": ["test"]}


def registry_task(spec: str):
    """The mteb registry's task ``NAME`` or ``NAME:SUBSET`` (one subset), not loaded yet."""
    import mteb

    name, _, subset = spec.partition(":")
    try:
        return mteb.get_task(name, hf_subsets=[subset] if subset else None, eval_splits=_DEFAULT_SPLITS.get(name))
    except (KeyError, ValueError) as err:
        raise JTCSEError(f"unknown MTEB task {name!r}: {err}") from None


def benchmark_tasks(name: str) -> list:
    """The tasks of mteb's benchmark ``name`` (``mteb.get_benchmark``, e.g. ``MTEB(eng, v2)``), not loaded yet."""
    import mteb

    try:
        return list(mteb.get_benchmark(name).tasks)
    except (KeyError, ValueError) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise JTCSEError(f"unknown MTEB benchmark {name!r} ({message}); `mteb.get_benchmarks()` lists them.") from None


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


def mteb_model(model, name: str):
    """``model`` wrapped for MTEB, named ``name`` and revised by :func:`model_revision`."""
    from mteb.models import SentenceTransformerEncoderWrapper

    wrapped = SentenceTransformerEncoderWrapper(model)
    wrapped.mteb_model_meta = wrapped.mteb_model_meta.model_copy(
        update={"name": name, "revision": model_revision(model)}
    )
    return wrapped


def _tasks(tasks, local_tasks, benchmark) -> list:
    """Every task of the run, built (and local files read) before anything is evaluated; two of one name refused."""
    from jtcse.evaluation.mteb_local_tasks import local_task, split_task_name

    built = [(registry_task(spec), None) for spec in tasks]
    built += [(task, None) for task in (benchmark_tasks(benchmark) if benchmark else [])]
    built += [(local_task(spec), str(spec)) for spec in local_tasks]
    seen: dict[str, str | None] = {}
    for task, spec in built:
        name = task.metadata.name
        if name in seen:
            first = f"--local-task {seen[name]}" if seen[name] else f"the mteb task {name}"
            fix = split_task_name(spec or seen[name])[1]
            raise JTCSEError(
                f"two tasks are named {name} ({first} and {f'--local-task {spec}' if spec else f'the mteb task {name}'}); "
                f"their results would share one file. Name a local one: --local-task OTHER_NAME={fix}"
            )
        seen[name] = spec
    return [task for task, _ in built]


def _evaluate(model, task, cache, batch_size: int):
    """mteb's ``TaskResult`` of ``model`` on ``task`` (a cached one only when it was computed on the same data)."""
    import mteb

    cached = cache.load_task_result(task.metadata.name, model.mteb_model_meta)
    stale = cached is not None and cached.dataset_revision != task.metadata.revision
    result = mteb.evaluate(
        model,
        task,
        cache=cache,
        overwrite_strategy="always" if stale else "only-missing",
        encode_kwargs={"batch_size": batch_size},
        show_progress_bar=False,
        raise_error=True,
    )
    return result.task_results[0]


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
    benchmark: str | None = None,
) -> dict:
    """Run each task on ``model``: registry names (``NAME`` or ``NAME:SUBSET``), the tasks of mteb's ``benchmark``
    and ``local_tasks`` (``[NAME=]PATH`` or ``[NAME=]TYPE:PATH``, :func:`jtcse.evaluation.mteb_local_tasks.local_task`).

    ``name``: the model's path or hub name (:func:`model_name`; default: what the model card says).
    ``cache_dir``: MTEB's result cache (default: MTEB's own, ``$MTEB_CACHE`` or ``~/.cache/mteb``); a
    cached result is reused only for the same name, weights (:func:`model_revision`) and task data.
    Writes mteb's results layout into ``output_dir`` (:mod:`jtcse.evaluation.mteb_results`; a file there that
    jtcse did not write is refused before anything runs) and returns the summary written to ``summary.json``:
    ``{"written_by", "model": {"name", "revision"}, "benchmark", "tasks": {name: {"main_score", "metric", "type",
    "hf_task_type", "file"} | {"error"}}, "files"}`` (``file``, ``files``: relative to ``output_dir``).
    """
    import mteb

    from jtcse.evaluation.mteb_local_tasks import parse_task_spec
    from jtcse.evaluation.mteb_results import results_folder, results_output, write_results

    built = _tasks(tasks, local_tasks, benchmark)  # bad names / unreadable local files are user mistakes: raise
    model = mteb_model(model, model_name(name) if name is not None else _card_name(model))
    meta = model.mteb_model_meta
    out = results_output(output_dir, [name, *(parse_task_spec(spec)[1] for spec in local_tasks)], cache_dir)
    out.check()  # before anything is evaluated
    cache = mteb.ResultCache(cache_dir)
    summary: dict = {"model": {"name": meta.name, "revision": meta.revision}, "benchmark": benchmark, "tasks": {}}
    written = write_results(out, meta, [], summary)
    for task in built:  # each task's result is written as it finishes (a rerun after Ctrl-C resumes from the cache)
        try:
            result = _evaluate(model, task, cache, batch_size)
        except Exception as err:  # noqa: BLE001 - a task that cannot run (offline data) is reported, not fatal
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            summary["tasks"][task.metadata.name] = {"error": f"{type(err).__name__}: {message}"}
            result = None
        else:
            summary["tasks"][task.metadata.name] = {
                "main_score": float(result.get_score()),
                "metric": task.metadata.main_score,
                "type": task.metadata.type,
                "hf_task_type": task.metadata._hf_task_type()[0],  # the model-index task type mteb itself gives it
                "file": (results_folder(meta) / f"{task.metadata.name}.json").as_posix(),
            }
        written = write_results(out, meta, [] if result is None else [result], summary)
    return written


def _card_name(model) -> str:
    """A model's name when no path is given: its model card's name or base model, else ``"unnamed"``."""
    card = model.model_card_data
    return card.model_name or card.base_model or "unnamed"
