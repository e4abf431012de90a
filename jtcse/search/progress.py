"""An encode's progress file (``OUT.json``; ``OUT/_jtcse.json`` for a shards folder): what a run records, whether the
next run resumes it, finds it finished or starts over, and how a run with ``--overwrite`` swaps its new output in.

The progress file is also the output's record (:mod:`jtcse.output_paths`): ``written_by`` first, ``files`` (each
written file's size and digest once the output is complete, being written before), then what the run was asked
(:func:`run_settings`: the model and the input file, each by path and by content, the format, dtype and
normalisation) and how far it got (``rows_done``, ``next_byte``, ``next_line``, ``parts_done``, ``complete``).

Inputs are compared by content (:func:`jtcse.output_paths.fingerprint`): a corpus with a line appended, or another
model saved at the model's path, is another input. A finished output of other inputs says which changed; an
unfinished one never resumes across a changed model or corpus ("the model changed since rows 0–511 were
written"): mixing two models' vectors in one file is never done.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json
from jtcse.output_paths import WORKING_FOLDERS, FileOutput, FolderOutput, fingerprint, write_errors
from jtcse.output_record import content, looks_like_a_record
from jtcse.output_rules import FILE_TEMPORARY
from jtcse.search.sinks import SHARD_META_FILE, SINKS, DamagedOutput, list_parts, output_format, rows_path_for

logger = logging.getLogger(__name__)

META_FORMAT = "jtcse-embeddings"
META_VERSION = 2
RESUME_KEYS = (
    "model", "model_content", "input", "input_content", "text_column", "output_format", "dtype", "normalized"
)  # fmt: skip
"""Settings that must agree for a run to continue a previous one (or to find it finished)."""
_CONTENT = {"model_content": ("the model", "model"), "input_content": ("the input", "input")}


def meta_path_for(output: str | Path) -> Path:
    """``OUT.json`` (a shards folder: ``OUT/_jtcse.json``): settings and progress of the run that writes ``OUT``."""
    output = Path(output)
    if output_format(output) == "shards":
        return output / SHARD_META_FILE
    return output.with_name(output.name + ".json")


def output_files(output: str | Path) -> list[Path]:
    """The files a finished run into ``output`` leaves: its progress file ``OUT.json``, ``OUT`` and, for
    ``.npy``, the row table ``STEM.rows.npy`` (progress file first, the order to delete them in)."""
    output = Path(output)
    npy = output_format(output) == "npy"
    return [meta_path_for(output), output] + ([rows_path_for(output)] if npy else [])


def read_meta(path: str | Path) -> dict:
    """A progress file (``OUT.json``) as a dict; one line saying it is damaged when it cannot be read."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise JTCSEError(
            f"{path} is damaged ({err}; cut short?): it is the progress file of the run that wrote its output. "
            "Delete it and the output it describes to start over, or pass --overwrite."
        ) from None


def run_settings(
    identity: str, model, input_path, output: str | Path, *, fp16: bool, normalize: bool, column: str | None = None
) -> dict:
    """The settings a run must share with an earlier one to continue it or find it finished (:data:`RESUME_KEYS`); a
    table's text column as chosen (:func:`jtcse.text_inputs.text_column`)."""
    from jtcse.text_inputs import input_name, is_table, open_table, text_column

    source = identity if Path(identity).expanduser().exists() else model
    return {
        "model": identity,
        "model_content": fingerprint(
            source if isinstance(source, (str, os.PathLike)) else identity, ignore=WORKING_FOLDERS, missing_ok=True
        ),
        "input": input_name(input_path),
        "input_content": fingerprint(input_path),
        "text_column": text_column(open_table(input_path), column, input_path) if is_table(input_path) else None,
        "output_format": output_format(output),
        "dtype": "float16" if fp16 else "float32",
        "normalized": bool(normalize),
    }


def same_settings(meta: dict, wanted: dict) -> bool:
    return all(meta.get(key) == wanted[key] for key in RESUME_KEYS)


def new_meta(out: FileOutput | FolderOutput, wanted: dict) -> dict:
    """The progress file of a run that starts from nothing: the record first (``files`` being written)."""
    fields = out.fields() if isinstance(out, FileOutput) else out.fields()
    return {
        **fields,
        "format": META_FORMAT,
        "format_version": META_VERSION,
        **wanted,
        "rows": None,
        "dim": None,
        "empty_lines": None,
        "rows_done": 0,
        "next_byte": 0,
        "next_line": 1,
        "complete": False,
    }


def sealed(out: FileOutput | FolderOutput, meta: dict) -> dict:
    """``meta`` of a complete output: each file it wrote with its size and digest (``files``)."""
    if isinstance(out, FileOutput):
        return {**meta, **out.fields(sealed=True), "complete": True}
    for path in out.path.iterdir():  # what a killed writer of a part left (Ray actors write several at once)
        match = FILE_TEMPORARY.fullmatch(path.name)
        if match and match["name"] in (meta.get("files") or {}) and path.is_file():
            path.unlink()
    parts = {path.name: content(path) for _, path in sorted(list_parts(out.path).items())}
    return {**meta, "files": parts, "complete": True}


def check_output(out: FileOutput | FolderOutput, reuse: bool) -> None:
    """Refuse, before anything is written, an output that ``jtcse encode`` may not write (a caller's working file,
    ``reuse``, is the caller's to check), and make the folder it goes in."""
    if not reuse:
        out.check()
    elif out.path.is_dir() and isinstance(out, FileOutput):
        raise JTCSEError(f"{out.path} is a folder; -o/--output names the file jtcse encode writes.")
    out.path.parent.mkdir(parents=True, exist_ok=True)


def _rows(meta: dict) -> str:
    done = meta.get("rows_done") or 0
    return f"rows 0–{done - 1}" if done else "its first rows"


def resumable_meta(meta_file: Path, output: Path, wanted: dict, overwrite: bool) -> dict | None:
    """The progress of a run to continue, or ``None`` to start fresh. A finished output is refused (saying which
    input changed, when one did), unless a part of it is missing (:func:`damage`): then the run goes on to encode
    what it lacks. An unfinished one of other inputs or settings is refused, never resumed."""
    fmt = output_format(output)
    if overwrite or not meta_file.is_file():  # (an output no progress file lists was refused by check_output)
        return None
    meta = read_meta(meta_file)
    if "format" not in meta:  # a record left by a swap that was cut off: nothing there to keep
        return None
    changed = [key for key in RESUME_KEYS if meta.get(key) != wanted[key]]
    started = meta.get("rows_done", 0) > 0 or meta.get("parts_done", 0) > 0
    inputs = [
        f"{_CONTENT[k][0]} {wanted[_CONTENT[k][1]]}" for k in changed if k in _CONTENT and meta.get(k) is not None
    ]
    differences = "; ".join(f"{key}: {meta.get(key)!r} then, {wanted[key]!r} now" for key in changed)
    if meta.get("complete"):
        if inputs:
            raise JTCSEError(
                f"{output} was encoded from other inputs: {' and '.join(inputs)} changed since (its content is not "
                "what was encoded); pass --overwrite to encode it again."
            )
        if changed:
            raise JTCSEError(
                f"{output} is already complete, made with other settings ({differences}); pass --overwrite to redo it."
            )
        if damage(output, fmt, meta) is None:
            raise JTCSEError(f"{output} is already complete ({meta.get('rows')} rows); pass --overwrite to redo it.")
    elif inputs and started:
        raise JTCSEError(
            f"{' and '.join(inputs)[0].upper()}{' and '.join(inputs)[1:]} changed since {_rows(meta)} of {output} were "
            "written; "
            "--overwrite to start again."
        )
    elif changed and started:
        raise JTCSEError(
            f"An unfinished run into {output} used other settings ({differences}); "
            "run with those settings to resume, or pass --overwrite to start over."
        )
    found = damage(output, fmt, meta)
    if found is not None:
        logger.warning("%s; encoding %s again.", found, "the rows it lacks" if fmt == "shards" else "it")
    if not started or not SINKS[fmt].can_resume(output) or meta.get("dim") is None or (found and fmt != "shards"):
        return None
    return {**meta, "complete": False}


def damage(output: Path, fmt: str, meta: dict) -> str | None:
    """What is missing or damaged in ``output`` (None: nothing found): any file of a finished output, the two files
    of an unfinished ``.npy`` (the parts of an unfinished parquet output are checked one by one)."""
    if not (meta.get("complete") or fmt == "npy") or not meta.get("rows"):
        return None
    try:
        SINKS[fmt].check_whole(output, meta["rows"])
    except DamagedOutput as err:
        return err.problem
    return None


def staging(output: Path) -> Path:
    """Where a run with ``--overwrite`` writes its new output, beside the old one: ``OUT.tmp`` (a folder)."""
    return output.with_name(output.name + ".tmp")


@contextmanager
def swapped_in(out: FileOutput | FolderOutput):
    """``--overwrite`` over an existing output: yields the path to encode into instead, beside it (``OUT.tmp/OUT``,
    marked as jtcse's by the progress file in it), and swaps the new output in once it is complete. A failure keeps
    the old output as it was (the new one is removed)."""
    folder = staging(out.path)
    _clear_staging(folder, out.path.name)
    folder.mkdir()
    try:
        yield folder / out.path.name
        if isinstance(out, FileOutput):
            _swap_files(out, folder)
        else:
            out.swap_in(folder / out.path.name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _clear_staging(folder: Path, name: str) -> None:
    """Remove a staging folder a killed run left (its progress file says it is jtcse's); refuse any other."""
    if not (folder.exists() or folder.is_symlink()):
        return
    meta = meta_path_for(folder / name)
    if folder.is_symlink() or not folder.is_dir() or not looks_like_a_record(meta, "jtcse encode"):
        raise JTCSEError(
            f"{folder} is in the way: jtcse encode writes its new output there before it replaces the old one, and "
            "jtcse did not make this one, so it is never deleted. Move it away."
        )
    shutil.rmtree(folder)


def _swap_files(out: FileOutput, folder: Path) -> None:
    """Move the complete new files from ``folder`` into place: first a progress file that lists them as being
    written and keeps nothing to resume from (a cut-off swap leaves an output the next run starts again), then
    each file, then the finished progress file."""
    out.check()  # the old files are still jtcse's
    new_meta_file = folder / out.record_path.name
    meta = read_meta(new_meta_file)
    interim = {**meta, **out.fields(), "rows_done": 0, "parts_done": 0, "complete": False}
    atomic_write_json(out.record_path, interim)
    for path in (out.path, *out.side):
        if (folder / path.name).exists():
            os.replace(folder / path.name, path)
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    os.replace(new_meta_file, out.record_path)


def write_failures(output: Path, overwrite: bool):
    """An ``OSError`` while encoding as one line saying what was kept (:func:`jtcse.output_paths.write_errors`)."""
    kept = (
        f"{output} is as it was (the new output was written beside it, and removed)."
        if overwrite
        else "The rows finished so far are kept: run the same command again once it can write, to go on."
    )
    return write_errors(output, kept)
