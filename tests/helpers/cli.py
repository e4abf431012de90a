"""Run ``jtcse`` (or a Python snippet) in a child process, always with the same environment rule.

``run_cli``/``run_python`` wait for the child; ``start_cli``/``start_python`` return the running
``Popen`` for tests that signal, freeze or talk to it.

The rule (:func:`subprocess_env`): the parent's environment, the hub offline, one BLAS thread, and this
checkout first on ``PYTHONPATH`` so the child imports the code under test. A probe that must prove a
checkpoint loads *without* jtcse runs with ``hide_jtcse=True``: isolated mode (``-I``: no ``PYTHONPATH``,
no cwd on ``sys.path``) plus an import hook refusing ``jtcse``, because an editable install stays visible.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def run_cli(*args: object, timeout: float = 600, cwd: str | Path | None = None, **env: object) -> subprocess.CompletedProcess:
    """``python -m jtcse ARGS`` with :func:`subprocess_env` (extra variables as keywords); output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "jtcse", *map(str, args)],
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def run_python(
    code: str, *, hide_jtcse: bool = False, timeout: float = 600, cwd: str | Path | None = None, **env: object
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; with ``hide_jtcse`` it cannot import jtcse (see the module docstring)."""
    command = [sys.executable, "-c", code]
    if hide_jtcse:
        command = [sys.executable, "-I", "-c", _HIDE_JTCSE + code]
    return subprocess.run(
        command, env=subprocess_env(**env), capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def start_cli(*args: object, cwd: str | Path | None = None, **env: object) -> subprocess.Popen:
    """Start ``python -m jtcse ARGS`` in the background (text pipes on stdin, stdout and stderr)."""
    return _start([sys.executable, "-m", "jtcse", *map(str, args)], cwd, env)


def start_python(code: str, *, cwd: str | Path | None = None, **env: object) -> subprocess.Popen:
    """Start ``code`` in a fresh interpreter in the background (text pipes on stdin, stdout and stderr)."""
    return _start([sys.executable, "-c", code], cwd, env)


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
