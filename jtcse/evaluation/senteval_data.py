"""File layouts of the SentEval STS tasks: where each file lives and how SentEval reads it.

Reading rules (those of SentEval's STS loaders, as used by SimCSE's evaluation):

* STS12–STS16: ``STS.input.<subset>.txt`` holds ``s1<TAB>s2`` per line (fields after the second are
  ignored) and ``STS.gs.<subset>.txt`` one gold score per line; a gold line that is empty drops its
  pair. Files are UTF-8; lines are split like Python's ``str.splitlines``. The original SemEval 2016
  names (``STS2016.input.<subset>.txt``) are accepted too.
* STS-B test: ``STS/STSBenchmark/sts-test.csv``, tab-separated, score in column 5, sentences in 6 and 7.
* SICK-R test: ``SICK/SICK_test_annotated.txt``, a header line, then ``pair_ID, sentence_A,
  sentence_B, relatedness_score, ...``.

Every sentence is whitespace-normalised the way SentEval tokenises (``s.split()``) and SimCSE's batcher
re-joins (``" ".join``). A reading problem raises :class:`JTCSEError` naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jtcse.corpus import header_row
from jtcse.errors import JTCSEError
from jtcse.evaluation.sts import STSPairs, read_stsb_file, scored_pairs

#: SentEval subsets of each STS year (STS13 without the licence-restricted SMT subset).
STS_YEAR_SUBSETS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}

#: The seven tasks of the headline table, in table order.
SENTEVAL_STS_TASKS: tuple[str, ...] = (*STS_YEAR_SUBSETS, "STSB", "SICKR")

# Directory names tried (relative to the data directory) for each year: the SentEval layout first,
# then the names the SemEval archives unpack to.
_YEAR_DIRS: dict[str, tuple[str, ...]] = {
    "STS12": ("STS/STS12-en-test", "STS12-en-test", "test-gold"),
    "STS13": ("STS/STS13-en-test", "STS13-en-test", "test-gs"),
    "STS14": ("STS/STS14-en-test", "STS14-en-test", "sts-en-test-gs-2014"),
    "STS15": ("STS/STS15-en-test", "STS15-en-test", "test_evaluation_task2a"),
    "STS16": ("STS/STS16-en-test", "STS16-en-test", "sts2016-english-with-gs-v1.0"),
}
_STSB_FILES = ("STS/STSBenchmark/sts-test.csv", "STSBenchmark/sts-test.csv", "stsbenchmark/sts-test.csv")
_SICK_FILES = ("SICK/SICK_test_annotated.txt", "SICK_test_annotated.txt")


@dataclass
class STSTaskData:
    """One evaluation task: its subsets' pairs (STS-B and SICK-R have one subset, ``test``)."""

    name: str
    subsets: dict[str, STSPairs]
    files: list[str] = field(default_factory=list)

    @property
    def n_pairs(self) -> int:
        return sum(len(p) for p in self.subsets.values())


def _decode_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_no = data[: err.start].count(b"\n") + 1
        raise JTCSEError(f"{path}: line {line_no} is not valid UTF-8 (byte {data[err.start]:#04x}).") from None


def read_sts_input_gold(input_path: str | Path, gold_path: str | Path) -> STSPairs:
    """Read one SemEval STS subset: sentence pairs from ``input_path``, scores from ``gold_path``.

    Pairs whose gold line is empty are dropped, as SentEval does.
    """
    input_path, gold_path = Path(input_path), Path(gold_path)
    for path in (input_path, gold_path):
        if not path.is_file():
            raise JTCSEError(f"STS file not found: {path}")
    input_lines = _decode_utf8(input_path).splitlines()
    gold_lines = _decode_utf8(gold_path).splitlines()
    if len(input_lines) != len(gold_lines):
        raise JTCSEError(
            f"{input_path} has {len(input_lines)} lines but {gold_path} has {len(gold_lines)}; "
            "each input line needs one gold line (empty to skip the pair)."
        )

    def rows():
        for line_no, (pair_line, gold_line) in enumerate(zip(input_lines, gold_lines, strict=True), start=1):
            fields = pair_line.split("\t")
            if len(fields) < 2:
                raise JTCSEError(
                    f"{input_path}: line {line_no} has no tab; an STS input line is 'sentence1<TAB>sentence2'."
                )
            if gold_line.strip():
                yield line_no, fields[0], fields[1], gold_line

    return scored_pairs(rows(), gold_path, str(gold_path))


def read_sick_file(path: str | Path) -> STSPairs:
    """Read a SICK file: pair_ID, sentence_A, sentence_B, relatedness_score[, …], with or without its header line (a
    first line whose pair_ID and score are names: :func:`jtcse.corpus.header_row`; its columns are then found by
    name). Every data line is read, the first one too."""
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"SICK file not found: {path}")
    lines = _decode_utf8(path).split("\n")
    header = lines[0].rstrip("\r").split("\t")
    cols = [1, 2, 3]  # SentEval's fixed positions: a file without a header, or whose header is renamed
    skip = 1 if header_row(header, numbers=(0, 3)) else 0
    if skip and all(name in header for name in ("sentence_A", "sentence_B", "relatedness_score")):
        cols = [header.index(name) for name in ("sentence_A", "sentence_B", "relatedness_score")]

    def rows():
        for line_no, line in enumerate(lines[skip:], start=1 + skip):
            if not line.strip():
                continue
            fields = line.strip().split("\t")
            if len(fields) <= max(cols):
                raise JTCSEError(
                    f"{path}: line {line_no} has {len(fields)} tab-separated fields, expected at least {max(cols) + 1}."
                )
            yield line_no, fields[cols[0]], fields[cols[1]], fields[cols[2]]

    return scored_pairs(rows(), path, f"SICK file {path}")


def _subset_files(directory: Path, year: str, subset: str) -> tuple[Path, Path] | None:
    full_year = "STS20" + year[-2:]
    for prefix in ("STS", full_year):
        input_path = directory / f"{prefix}.input.{subset}.txt"
        gold_path = directory / f"{prefix}.gs.{subset}.txt"
        if input_path.is_file() or gold_path.is_file():
            return input_path, gold_path
    return None


def locate_task(data_dir: str | Path, task: str, task_dir: str | Path | None = None) -> list[Path]:
    """Files of ``task`` under ``data_dir`` (or exactly ``task_dir`` / a file when given).

    Raises :class:`JTCSEError` naming what is missing.
    """
    data_dir = Path(data_dir)
    if task in STS_YEAR_SUBSETS:
        candidates = [Path(task_dir)] if task_dir else [data_dir / d for d in _YEAR_DIRS[task]]
        directory = next((d for d in candidates if d.is_dir()), None)
        if directory is None:
            raise JTCSEError(f"no directory for {task}; looked for " + ", ".join(str(c) for c in candidates))
        files: list[Path] = []
        missing: list[str] = []
        for subset in STS_YEAR_SUBSETS[task]:
            found = _subset_files(directory, task, subset)
            if found is None:
                missing.append(f"STS.input.{subset}.txt")
                continue
            for path in found:
                if not path.is_file():
                    missing.append(path.name)
            files.extend(found)
        if missing:
            raise JTCSEError(f"{task} is incomplete in {directory}: missing " + ", ".join(missing))
        return files
    names = {"STSB": _STSB_FILES, "SICKR": _SICK_FILES}.get(task)
    if names is None:
        raise JTCSEError(f"unknown task {task!r}; choose from {', '.join(SENTEVAL_STS_TASKS)}")
    if task_dir:
        given = Path(task_dir)
        candidates = [given] if given.is_file() else [given / Path(n).name for n in names]
    else:
        candidates = [data_dir / n for n in names]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise JTCSEError(f"no file for {task}; looked for " + ", ".join(str(c) for c in candidates))
    return [path]


def load_task(data_dir: str | Path, task: str, task_dir: str | Path | None = None) -> STSTaskData:
    """Locate and read one task; every subset of an STS year must be present (its score is over all of them)."""
    files = locate_task(data_dir, task, task_dir)
    if task in STS_YEAR_SUBSETS:
        subsets = {
            subset: read_sts_input_gold(files[2 * i], files[2 * i + 1])
            for i, subset in enumerate(STS_YEAR_SUBSETS[task])
        }
    elif task == "STSB":
        subsets = {"test": read_stsb_file(files[0])}
    else:
        subsets = {"test": read_sick_file(files[0])}
    return STSTaskData(task, subsets, [str(f) for f in files])
