"""A user's folder for sweeps that try jtcse as a careful user would (``scripts/sweep_outputs.py``): files of mine, real
``python -m jtcse`` command lines run in it against any checkout, and what became of my files.

A :class:`Case` is a fresh temporary folder. :meth:`Case.mine` puts a file (or a tower) of mine there,
:meth:`Case.freeze` takes the sha256 of each, :meth:`Case.jtcse` runs a command (the checkout under test on
``PYTHONPATH``; optionally with environment variables and a file-size limit, ``ulimit -f``), classifying how its
stderr ended (clean, one ``Error:`` line, a traceback), and :meth:`Case.row` makes a table row whose verdict is
``bad`` when a file of mine was replaced or deleted, a command ended in a traceback, or the case's own test failed.
:func:`run_cases` runs a sweep's cases in a temporary root with a local HTTP server (``data fetch``);
:func:`table` and :func:`combined` print the markdown tables of ``docs/outputs_sweep.md``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MY_BYTES = b"a file of mine: jtcse must never replace or delete it\n"
VERDICT = {"bad": "**bad**", "ok": "ok"}  # as the tables show it
TOWERS = ("model", "model_b", "X", "mymodel", "student")


@dataclass
class Call:
    """A command as run: how stderr ended (clean, one Error: line, traceback, other), in words, and its key line."""

    command: str
    rc: int
    stderr_kind: str
    said: str
    message: str
    seconds: float
    stderr: str = field(repr=False)


@dataclass
class Row:
    """One row of the table and what stands behind it."""

    case: str
    what: str
    outcome: str
    verdict: str
    lost: list[str]  # the files of mine replaced or deleted
    reported: dict
    calls: list[Call]


class SetupFailed(Exception):
    """A command that sets a case up (a first run) failed: the case is reported bad, the sweep goes on."""


def quote(message: str, width: int = 100) -> str:
    """An error line for the table: without ``Error:``, cut to ``width`` characters."""
    text = message.removeprefix("Error: ")
    return f"“{text if len(text) <= width else text[: width - 1] + '…'}”"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _not_json(constant: str):
    raise ValueError(f"{constant} is not JSON")


def read_json(path: Path, strict: bool = True) -> Any:
    """``path`` as JSON; None when missing or not JSON (``strict``: a bare NaN is not, as to any reader but Python)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"), **({"parse_constant": _not_json} if strict else {}))
    except (OSError, ValueError):
        return None


_EXCEPTION = re.compile(r"^[\w.]+(Error|Exception|Interrupt)\b")
"""The last line of a traceback: the exception's name, then its message."""


def _not_code(line: str) -> bool:
    """A line that is not a traceback's (its ``Error:`` may follow a progress bar on the same line)."""
    return not line.startswith(("  File ", "    ", "Traceback")) and not _EXCEPTION.match(line)


def _limit_file_size(limit: int):
    def apply() -> None:  # in the child, before exec: what `ulimit -f` does
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


class Case:
    """A fresh folder where the user keeps files of theirs, runs jtcse and looks afterwards. ``sweep``: what every case
    shares (its ``root`` folder, ``towers`` by name, ``files`` by name, the commands' ``env``)."""

    def __init__(self, sweep, case: str, mine: str = ""):
        self.sweep, self.case = sweep, case
        self.dir = Path(tempfile.mkdtemp(prefix=f"case{case}-", dir=sweep.root))
        self.calls: list[Call] = []
        self.mine_paths: list[Path] = []
        self._frozen: dict[str, str] = {}
        for rel in mine.split():
            self.mine(rel)

    def mine(self, rel: str, data: bytes | str | None = None) -> Path:
        """A file of mine at ``rel``: a tower (model, model_b, X), one of the sweep's files by its name, else a few
        bytes of mine."""
        path, sweep = self.dir / rel, self.sweep
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None and rel in TOWERS:
            shutil.copytree(sweep.towers["b" if rel == "model_b" else "a"], path)
        else:
            data = sweep.files.get(rel, MY_BYTES) if data is None else data
            path.write_bytes(data.encode() if isinstance(data, str) else data)
        self.mine_paths.append(path)
        return path

    def freeze(self) -> None:
        """Every file of mine as it is now (after my own edits): what jtcse must leave as it is."""
        paths = [p for root in self.mine_paths for p in (sorted(root.rglob("*")) if root.is_dir() else [root])]
        self._frozen = {str(p.relative_to(self.dir)): sha256(p) for p in paths if p.is_file()}

    def lost(self) -> list[str]:
        """Each file of mine deleted or replaced since :meth:`freeze`, in words."""
        now = {rel: sha256(self.dir / rel) for rel in self._frozen if (self.dir / rel).is_file()}
        gone = [f"{rel} deleted" for rel in self._frozen if rel not in now]
        changed = [rel for rel, digest in now.items() if digest != self._frozen[rel]]
        return gone + [f"{rel} replaced{' by JSON' * bool(read_json(self.dir / rel))}" for rel in changed]

    def jtcse(self, command: str, setup: bool = False, fsize: int | None = None, **env: str) -> Call:
        """``python -m jtcse COMMAND`` here, the checkout under test on PYTHONPATH; ``setup``: it must succeed;
        ``fsize``: no file it writes may grow past that many bytes (``ulimit -f``); ``env``: more variables."""
        start = time.perf_counter()
        argv = [sys.executable, "-m", "jtcse", *shlex.split(command)]
        proc = subprocess.run(argv, cwd=self.dir, env={**self.sweep.env, **env}, capture_output=True, text=True,
                              timeout=900, preexec_fn=_limit_file_size(fsize) if fsize else None)  # fmt: skip
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        errors = [line[line.index("Error: ") :] for line in lines if "Error: " in line and _not_code(line)]
        if "Traceback (most recent call last)" in proc.stderr:
            last = next((line for line in reversed(lines) if _EXCEPTION.match(line)), lines[-1])
            kind, said, message = "traceback", f"traceback ({last.split(':')[0]})", last
        elif proc.returncode == 2 and len(errors) == 1:
            kind, said, message = "one Error: line", "refused in one line", errors[0]
        else:
            kind = "clean" if proc.returncode == 0 else "other"
            said, message = f"exit {proc.returncode}", errors[-1] if errors else ""
        seconds = time.perf_counter() - start
        call = Call(f"jtcse {command}", proc.returncode, kind, said, message, round(seconds, 2), proc.stderr)
        self.calls.append(call)
        if setup and proc.returncode != 0:
            raise SetupFailed(self.row(f"set up by `{command}`", f"it failed: {call.said} {quote(message)}", False))
        return call

    def described(self, command: str, note: str = "") -> str:
        """What the user does: the command as the sweep shows it, with a note on the files of mine that are not the
        usual inputs (``sweep.notes`` by name, else "NAME: mine")."""
        sweep = self.sweep
        mine = [sweep.notes.get(p.name, f"{p.relative_to(self.dir)}: mine") for p in self.mine_paths
                if p.name not in sweep.inputs]  # fmt: skip
        return sweep.shown(command) + (f" ({note or '; '.join(mine)})" if note or mine else "")

    def one_command(self, command: str, needs: str = "", note: str = "") -> Row:
        """One command over files of mine: ok when none of them changed and, refused, its line says ``needs``."""
        self.freeze()
        call = self.jtcse(command)
        ok = needs in call.message
        outcome = said(call) if ok or not call.message else f"{said(call)}, not saying {needs!r}"
        return self.row(self.described(command, note), outcome, ok)

    def replace_tower(self, name: str, which: str = "b") -> None:
        """Another model saved at the path of my model ``name`` (tower ``which``), as a user would."""
        shutil.rmtree(self.dir / name)
        shutil.copytree(self.sweep.towers[which], self.dir / name)

    def row(self, what: str, outcome: str, ok: bool, calls: list[Call] | None = None, **reported) -> Row:
        """The row: ``ok`` holds only if no file of mine was lost and no call ended in a traceback."""
        calls = self.calls if calls is None else calls
        lost = self.lost() if self._frozen else []
        outcome = f"{', '.join(lost)}; {outcome}" if lost else outcome
        ok = ok and not lost and all(c.stderr_kind != "traceback" for c in calls)
        return Row(self.case, what, outcome, "ok" if ok else "bad", lost, reported, calls)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |" for cells in rows]
    return "\n".join(lines)


def combined(before: Path, after: Path) -> str:
    """One table of two sweeps' --json records (the same rows in the same order): before / after."""
    pairs = zip(*(json.loads(path.read_text(encoding="utf-8"))["rows"] for path in (before, after)), strict=True)
    header = ["case", "what the user does", "before", "after", "verdict before → after"]
    return table(header, [[a["case"], a["what"], a["outcome"], b["outcome"],
                           f"{VERDICT[a['verdict']]} → {VERDICT[b['verdict']]}"] for a, b in pairs])  # fmt: skip


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def run_cases(cases: list[Callable], make_sweep: Callable[[Path, str], Any]) -> list[Row]:
    """Each of ``cases`` (a function of the sweep returning rows) in a temporary root removed afterwards, with a
    local HTTP server of the root's ``served/`` folder (``make_sweep(root, its URL)`` fills it and makes the
    sweep); a case whose setup fails is one bad row, and the sweep goes on."""
    root = Path(tempfile.mkdtemp(prefix="sweep_outputs-"))
    (root / "served").mkdir()
    start, rows = time.perf_counter(), []
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root / "served")))
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        sweep = make_sweep(root, f"http://127.0.0.1:{server.server_address[1]}")
        for case in cases:
            try:
                rows += case(sweep)
            except SetupFailed as failed:
                rows.append(failed.args[0])
            print(f"{case.__name__}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    finally:
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def said(call: Call) -> str:
    """How a call ended, with its key line quoted."""
    return f"{call.said}: {quote(call.message)}" if call.message else call.said


class UserFiles:
    """What every case of a sweep shares: its temporary ``root``, two tiny towers (``towers["a"]``, ``["b"]``), lines
    of the shared data (``data``: 12 STS-B dev pairs across genres and scores, 12 SICK train pairs, 64 wiki12k
    sentences, also served over HTTP with a ``manifest.toml`` for ``data fetch``), ``files`` by name, and the
    environment of every command: the checkout measured on ``PYTHONPATH``, offline, one thread, no bytecode. How a
    table shows a command (``shown``) and a file of mine (``notes``; ``inputs``: the usual ones, not noted)."""

    notes: dict[str, str] = {}
    inputs: set[str] = set()

    @staticmethod
    def shown(command: str) -> str:
        return f"`{command}`"

    def __init__(self, checkout: Path, root: Path, server_url: str, data: Path):
        from jtcse.testing.towers import make_tiny_tower  # 4 layers, hidden 32, a real tokenizer

        self.root = root
        self.towers = {name: Path(make_tiny_tower(root / name, seed=seed)) for seed, name in enumerate("ab")}
        lines = (data / "stsbenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines(keepends=True)
        self.dev_text = "".join(lines[::125][:12])
        sick = (data / "sick" / "SICK_train.txt").read_text(encoding="utf-8").splitlines(keepends=True)
        self.sick_text = "".join(sick[:12])  # (the shared copy has no header line)
        wiki = [line for line in (data / "wiki12k.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
        self.corpus_text = "".join(f"{line}\n" for line in wiki[:64])
        (root / "served" / "corpus.txt").write_text(self.corpus_text, encoding="utf-8")
        digest = hashlib.sha256(self.corpus_text.encode()).hexdigest()
        manifest = (f'schema = 1\n[datasets.corpus]\nsummary = "a corpus"\n[[datasets.corpus.files]]\n'
                    f'name = "corpus.txt"\nurl = "{server_url}/corpus.txt"\nsha256 = "{digest}"\n')  # fmt: skip
        self.files: dict[str, str | bytes] = {"dev.csv": self.dev_text, "corpus.txt": self.corpus_text,
                                              "manifest.toml": manifest}  # fmt: skip
        self.env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1",
                    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                    "TOKENIZERS_PARALLELISM": "false", "NO_PROXY": "127.0.0.1,localhost", "JTCSE_DEBUG": "0"}  # fmt: skip


def main(doc: str, cases: dict[str, list[Callable]], make_sweep: Callable[[Path, Path, str], Any]) -> None:
    """A sweep's command line (``doc``: its description): ``--checkout PATH [--issue N] [--json OUT]`` runs the cases
    of issue N (``cases``) against the checkout and prints their table; ``--combine BEFORE AFTER`` prints one
    before / after table of two runs' records."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, help="the checkout whose jtcse is measured (put on PYTHONPATH)")
    parser.add_argument("--issue", choices=list(cases), default=list(cases)[-1], help="whose cases to run")
    parser.add_argument("--json", type=Path, help="also write every record here")
    parser.add_argument("--combine", nargs=2, type=Path, metavar=("BEFORE.json", "AFTER.json"),
                        help="run nothing: print one before / after table of two sweeps' --json records")  # fmt: skip
    args = parser.parse_args()
    if args.combine:
        print(combined(*args.combine))
        return
    if args.checkout is None or not (args.checkout / "jtcse" / "__init__.py").is_file():
        parser.error(f"--checkout must name a checkout holding the jtcse package, not {args.checkout}")
    checkout, start = args.checkout.resolve(), time.perf_counter()
    rows = run_cases(cases[args.issue], lambda root, url: make_sweep(checkout, root, url))
    rows.sort(key=lambda row: int(row.case))  # stable: a case's rows keep their order
    seconds = time.perf_counter() - start
    header = ["case", "what the user does", "outcome", "verdict"]
    print(table(header, [[row.case, row.what, row.outcome, VERDICT[row.verdict]] for row in rows]))
    print(f"\n{sum(row.verdict == 'bad' for row in rows)} bad of {len(rows)} rows; {seconds:.0f} s", flush=True)
    if args.json:
        records = [asdict(row) for row in rows]
        for call in (call for record in records for call in record["calls"]):
            call["stderr"] = call["stderr"][-1500:]
        record = {"checkout": str(checkout), "issue": args.issue, "seconds": round(seconds, 1), "rows": records}
        args.json.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
