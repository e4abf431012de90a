"""Run ``jtcse`` (or a Python snippet) in a child process, always with the same environment rule; or ``jtcse``
in this process (:func:`invoke_cli`), where a fresh interpreter is not the point.

``run_cli``/``run_python`` wait for the child; ``start_cli``/``start_python`` return the running
``Popen`` for tests that signal, freeze or talk to it. A child pays seconds of imports (torch,
sentence-transformers) that the test process has already paid: :func:`invoke_cli` runs the same
``jtcse.cli.main`` here and answers like :func:`run_cli`. Fresh processes stay where they are the
subject: loads without jtcse, launches under torchrun or accelerate, import checks, pool workers. A test whose
subject is a process of its own (killed, frozen holding a lock, under a file-size limit) but not a fresh
interpreter forks this one instead (:func:`fork_cli`, :func:`fork_run_cli`): a real process, without the imports.

The rule (:func:`subprocess_env`): the parent's environment, the hub offline, one BLAS thread, and this
checkout first on ``PYTHONPATH`` so the child imports the code under test. A probe that must prove a
checkpoint loads *without* jtcse runs with ``hide_jtcse=True``: isolated mode (``-I``: no ``PYTHONPATH``,
no cwd on ``sys.path``) plus an import hook refusing ``jtcse``, because an editable install stays visible.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[2]

_HIDE_JTCSE = """\
import sys
class _HideJtcse:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'jtcse':
            raise ModuleNotFoundError(f'No module named {name!r} (hidden)', name=name)
sys.meta_path.insert(0, _HideJtcse())
try:
    import jtcse
except ModuleNotFoundError:
    pass
else:
    sys.exit('jtcse is importable')
"""


@functools.cache
def click_app():
    """The ``jtcse`` command line as click sees it (typer builds it from the command functions, ~30 ms): built once
    a test process, for tests that parse a command line without running it (``.commands[NAME].make_context``)."""
    import typer

    from jtcse.cli import app

    return typer.main.get_command(app)


def subprocess_env(**extra: object) -> dict[str, str]:
    """The environment of every child process the tests start (see the module docstring)."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    )
    env.update({key: str(value) for key, value in extra.items()})
    return env


def run_cli(
    *args: object, timeout: float = 600, cwd: str | Path | None = None, **env: object
) -> subprocess.CompletedProcess:
    """``python -m jtcse ARGS`` with :func:`subprocess_env` (extra variables as keywords); output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "jtcse", *map(str, args)],
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def run_launch(
    command: list[object], *, timeout: float = 600, cwd: str | Path | None = None, **env: object
) -> subprocess.CompletedProcess:
    """A multi-process launcher (``torchrun``, ``accelerate launch``) with :func:`subprocess_env`, waited for.

    Past ``timeout`` the launcher is killed with every process it started, and ``TimeoutExpired`` raised with what
    they printed. Killing the launcher alone would leave its ranks behind (torchrun starts each in a session of its
    own), blocked in a collective and holding the output pipes.
    """
    import psutil  # (accelerate's dependency)

    proc = subprocess.Popen(
        [str(part) for part in command], env=subprocess_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=cwd,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            launched = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            launched = []
        for process in [psutil.Process(proc.pid), *launched]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        stdout, stderr = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, output=stdout, stderr=stderr) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def invoke_cli(*args: object, cwd: str | Path | None = None, **env: object) -> subprocess.CompletedProcess:
    """``jtcse ARGS`` run by ``jtcse.cli.main`` in this process, answering as :func:`run_cli` does.

    The call sees the environment rule (extra variables as keywords) and ``cwd``, both restored afterwards, and
    one torch thread, as a child would (``OMP_NUM_THREADS=1``). stdout and stderr are captured with what a child
    also prints there: log records of WARNING and above (Python's last-resort handler) and, for an uncaught
    exception, its traceback (exit status 1).
    """
    out, err = io.StringIO(), io.StringIO()
    code = _main_here(args, cwd, env, out, err)
    return subprocess.CompletedProcess(["jtcse", *map(str, args)], code, out.getvalue(), err.getvalue())


def _main_here(args: tuple, cwd: str | Path | None, env: dict[str, object], out: IO[str], err: IO[str]) -> int:
    """Run ``jtcse ARGS`` in this process as :func:`invoke_cli` describes, printing to ``out`` and ``err``; the exit
    status. The environment, ``sys.argv``, the working folder and torch's threads are restored afterwards."""
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    main_module = sys.modules["__main__"]
    main_package = main_module.__dict__.get("__package__")
    os.environ.update(subprocess_env(**env))
    # what `python -m jtcse` sees: click names the program after them ("Usage: python -m jtcse ...")
    sys.argv, main_module.__package__ = [str(REPO / "jtcse" / "__main__.py"), *map(str, args)], "jtcse"
    root.addHandler(handler)
    try:
        if threads is not None:
            torch.set_num_threads(1)
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            from jtcse.cli import main

            try:
                main()
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            except Exception:  # noqa: BLE001 - a child prints it and exits 1
                traceback.print_exc()
                code = 1
    finally:
        root.removeHandler(handler)
        if threads is not None:
            torch.set_num_threads(threads)
        os.chdir(saved_cwd)
        sys.argv, main_module.__package__ = saved_argv, main_package
        os.environ.clear()
        os.environ.update(saved_env)
    return code


class ForkedCli:
    """``jtcse ARGS`` running in a child forked from this process (:func:`fork_cli`); it answers as a
    ``subprocess.Popen`` does for what the tests ask of one: ``pid``, ``args``, ``returncode`` (``-N`` when
    signal N ended it), ``wait`` and ``communicate`` (its stdout and stderr as text)."""

    def __init__(self, pid: int, args: list[str], out: IO[bytes], err: IO[bytes]) -> None:
        self.pid, self.args, self.returncode = pid, args, None
        self._out, self._err = out, err

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            else:
                time.sleep(0.05)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return tuple(_read_all(stream) for stream in (self._out, self._err))


def _read_all(stream: IO[bytes]) -> str:
    stream.seek(0)
    return stream.read().decode("utf-8", errors="replace")


def fork_cli(
    *args: object, cwd: str | Path | None = None, file_size_kib: int | None = None, **env: object
) -> ForkedCli:
    """Start ``jtcse ARGS`` in a child forked from this process, as :func:`invoke_cli` runs it, and return at once.

    For the tests whose subject is a process of its own (killed, frozen holding its lock, sent Ctrl-C, or held under
    a file-size limit: ``file_size_kib``, as ``ulimit -f``) and not a fresh interpreter: the child starts with what
    this process has imported, not with a fresh interpreter's seconds of imports. Its stdout and stderr go to
    temporary files (never this process's, which pytest-xdist talks through); it acts on Ctrl-C (SIGINT) whatever
    this process inherited, and ends with ``os._exit``, running none of this process's exit handlers. Not for a
    child that talks to a server thread of this process (a lock held by a thread is held forever in the child).
    """
    import signal
    import tempfile

    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # or the child would print what this process had buffered
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            stdin = os.open(os.devnull, os.O_RDONLY)
            for fd, target in ((0, stdin), (1, out.fileno()), (2, err.fileno())):
                os.dup2(target, fd)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if file_size_kib is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_kib * 1024,) * 2)
                sys.dont_write_bytecode = True  # (a .pyc cut short by the limit would break later imports)
            child_out = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
            child_err = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
            sys.stdout, sys.stderr = child_out, child_err
            try:
                code = _main_here(args, cwd, env, child_out, child_err)
            except KeyboardInterrupt:  # as a fresh interpreter ends on an uncaught Ctrl-C: killed by SIGINT
                traceback.print_exc()
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
        finally:
            os._exit(code)
    return ForkedCli(pid, ["jtcse", *map(str, args)], out, err)


def fork_run_cli(*args: object, timeout: float = 600, **options: object) -> subprocess.CompletedProcess:
    """:func:`fork_cli`, waited for: answers as :func:`run_cli` does."""
    child = fork_cli(*args, **options)
    stdout, stderr = child.communicate(timeout=timeout)
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)


def run_script_here(script: Path, *args: object) -> str:
    """Run the Python script ``script ARGS`` (``python SCRIPT ARGS``: a benchmark in scripts/) in this process as its
    ``__main__``; what it printed. ``sys.argv``, torch's threads and torch's random state are restored afterwards."""
    import runpy

    import torch

    saved_argv, threads, rng = sys.argv, torch.get_num_threads(), torch.get_rng_state()
    out = io.StringIO()
    sys.argv = [str(script), *map(str, args)]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved_argv
        torch.set_num_threads(threads)
        torch.set_rng_state(rng)
    return out.getvalue()


_NO_COLLECTOR = "import atexit, gc; gc.disable(); atexit.register(gc.freeze)\n"
"""The first line of every snippet :func:`run_python` and :func:`start_python` run: no cyclic garbage collection, and
none at exit. A snippet imports torch and sentence-transformers, millions of long-lived objects, and is gone a few
seconds later; the collector would walk that growing heap again and again (tests/conftest.py does the same while
collecting): about 2 of a snippet's 7-9 CPU-seconds. What a snippet checks does not depend on it."""


def run_python(
    code: str, *, hide_jtcse: bool = False, timeout: float = 600, cwd: str | Path | None = None, **env: object
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; with ``hide_jtcse`` it cannot import jtcse (see the module docstring).
    The cyclic garbage collector is off in it (:data:`_NO_COLLECTOR`)."""
    command = [sys.executable, "-c", _NO_COLLECTOR + code]
    if hide_jtcse:
        command = [sys.executable, "-I", "-c", _NO_COLLECTOR + _HIDE_JTCSE + code]
    return subprocess.run(command, env=subprocess_env(**env), capture_output=True, text=True, timeout=timeout, cwd=cwd)


_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
"""Run the rest of the command line as a program started from a terminal gets it: with Ctrl-C (SIGINT) acted on.
A child inherits SIGINT *ignored* from a background job of a non-interactive shell (``.ci/run &``, a CI runner), and
Python then never installs its handler: a SIGINT a test sends would do nothing (issue 42's flaky Ctrl-C test). The
same process (``os.execv``), so its PID is the one the test signals."""


def start_cli(*args: object, cwd: str | Path | None = None, **env: object) -> subprocess.Popen:
    """Start ``python -m jtcse ARGS`` in the background (text pipes on stdin, stdout and stderr), with SIGINT acted
    on whatever the test runner inherited (:data:`_AS_FROM_A_TERMINAL`)."""
    return _start([sys.executable, "-c", _AS_FROM_A_TERMINAL, "-m", "jtcse", *map(str, args)], cwd, env)


def start_python(code: str, *, cwd: str | Path | None = None, **env: object) -> subprocess.Popen:
    """Start ``code`` in a fresh interpreter in the background (text pipes on stdin, stdout and stderr); the collector
    off (:data:`_NO_COLLECTOR`)."""
    return _start([sys.executable, "-c", _NO_COLLECTOR + code], cwd, env)


def _start(command: list[str], cwd: str | Path | None, env: dict[str, object]) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        env=subprocess_env(**env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The ``Error: ...`` line of a refused command; fails unless it exited 2 with no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, result.stderr[-2000:]
    return lines[0]
