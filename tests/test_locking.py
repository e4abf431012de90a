"""Output locks, atomic writes and the crash hook (jtcse.locking), with real processes holding locks."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import textwrap

import pytest
from helpers.cli import run_python, start_python

from jtcse.errors import JTCSEError
from jtcse.locking import (
    OutputLockedError,
    atomic_folder,
    atomic_path,
    atomic_write_json,
    crash_point,
    lock_path_for,
    locks_output,
    output_lock,
)


def _holder(output, then: str = "sys.stdin.readline()") -> subprocess.Popen:
    """A child process that takes the lock on ``output``, says so on stdout, then runs ``then``."""
    code = textwrap.dedent(
        f"""
        import os, signal, sys
        from jtcse.locking import output_lock
        with output_lock({str(output)!r}):
            print("held", flush=True)
            {then}
        """
    )
    proc = start_python(code)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_file_sits_beside_the_output_and_names_the_holder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert lock_path_for("out.npy") == tmp_path / "out.npy.lock"
    assert lock_path_for(tmp_path / "run") == tmp_path / "run.lock"  # a folder's lock is beside it, too
    with output_lock("run") as path:
        assert path == tmp_path / "run.lock"
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["output"] == "run"
        # the same output spelt another way is the same lock, refused at once even in this process
        with pytest.raises(OutputLockedError, match=rf"^{tmp_path / 'run'} is being written by PID {os.getpid()} on "):
            with output_lock(tmp_path / "run"):
                pass
    assert not path.exists()  # a clean exit leaves nothing behind
    with output_lock("run"):  # and the lock can be taken again
        pass


def test_second_process_is_refused_naming_the_holder(tmp_path):
    out = tmp_path / "vectors.npy"
    holder = _holder(out)
    try:
        with pytest.raises(OutputLockedError) as caught:
            with output_lock(out):
                pytest.fail("two holders")
        message = str(caught.value)
        assert f"PID {holder.pid} on " in message and str(out) + ".lock" in message
        assert "\n" not in message and isinstance(caught.value, JTCSEError)
        assert caught.value.holder["pid"] == holder.pid
    finally:
        holder.communicate("go\n", timeout=60)
    assert holder.returncode == 0
    with output_lock(out):  # released by the holder's clean exit
        pass


def test_lock_of_a_killed_process_is_taken_over_with_a_warning(tmp_path, caplog):
    out = tmp_path / "run"
    holder = _holder(out, then="os.kill(os.getpid(), signal.SIGKILL)")
    holder.wait(timeout=60)
    assert holder.returncode == -signal.SIGKILL
    assert json.loads(lock_path_for(out).read_text())["pid"] == holder.pid  # the file outlived its process
    with caplog.at_level(logging.WARNING, logger="jtcse.locking"):
        with output_lock(out) as path:
            assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"Taking over the lock on {out} left by PID {holder.pid} on " in caplog.text


def test_lock_under_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(JTCSEError, match="plain is a file, not a folder"):
        with output_lock(tmp_path / "plain" / "out.npy"):
            pass
    assert (tmp_path / "plain").read_text() == "x"


def test_locks_output_decorator_locks_the_named_argument(tmp_path):
    @locks_output("where")
    def write(text, where):
        assert lock_path_for(where).is_file()
        with output_lock(where):
            pass

    with pytest.raises(OutputLockedError):
        write("x", where=tmp_path / "a")
    assert not lock_path_for(tmp_path / "a").exists()


def test_atomic_path_replaces_whole_or_not_at_all(tmp_path):
    target = tmp_path / "summary.json"
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("crash mid-write")
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]  # no temporary left


def test_atomic_folder_replaces_the_folder_whole_or_not_at_all(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("old")
    (tmp_path / "model.tmp").mkdir()  # left by a killed earlier attempt: cleared first
    (tmp_path / "model.tmp" / "stale.txt").write_text("stale")
    with pytest.raises(RuntimeError):
        with atomic_folder(target) as tmp:
            tmp.mkdir()
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("crash mid-save")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"] and os.listdir(target) == ["old.txt"]
    with atomic_folder(target) as tmp:
        tmp.mkdir()
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"] and os.listdir(target) == ["new.txt"]


def test_crash_point_kills_at_the_chosen_pass():
    code = "from jtcse.locking import crash_point\nfor i in range(5):\n    crash_point('step'); print(i, flush=True)"
    killed = run_python(code, JTCSE_CRASH_AT="step:3")
    assert killed.returncode == -signal.SIGKILL and killed.stdout.split() == ["0", "1"]
    other = run_python(code, JTCSE_CRASH_AT="elsewhere:1")
    assert other.returncode == 0 and other.stdout.split() == ["0", "1", "2", "3", "4"]
    crash_point("step")  # unset here: does nothing
