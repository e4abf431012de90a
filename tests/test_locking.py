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


@pytest.mark.parametrize("kind", ["my file", "empty file", "folder", "link"])
def test_a_lock_file_jtcse_did_not_write_is_never_taken_over_nor_deleted(tmp_path, kind):
    """Issue 42, root cause 2: `output_lock` emptied and removed any OUT.lock, saying only that it was "taking over
    the lock". Now a lock path that holds no jtcse holder record is refused in one line and left as it is."""
    out, lock = tmp_path / "out.npy", tmp_path / "out.npy.lock"
    (tmp_path / "mine").mkdir()
    if kind == "my file":
        lock.write_text('{"my": "notes"}\n')
    elif kind == "empty file":
        lock.touch()
    elif kind == "folder":
        lock.mkdir()
        (lock / "notes.txt").write_text("mine")
    else:
        lock.symlink_to(tmp_path / "mine")
    before = sorted((str(p), p.is_dir() or p.read_text()) for p in tmp_path.rglob("*"))
    with pytest.raises(JTCSEError, match=rf"^{lock} is in the way: it is where jtcse keeps the lock of {out}, and "):
        with output_lock(out):
            pass
    assert sorted((str(p), p.is_dir() or p.read_text()) for p in tmp_path.rglob("*")) == before


def test_a_lock_root_folder_is_one_line():
    """Issue 42, item 8: `-o /` said "PosixPath('/') has an empty name"."""
    with pytest.raises(JTCSEError, match="^/ is the root folder"):
        lock_path_for("/")


def test_crash_point_kills_at_the_chosen_pass():
    code = "from jtcse.locking import crash_point\nfor i in range(5):\n    crash_point('step'); print(i, flush=True)"
    killed = run_python(code, JTCSE_CRASH_AT="step:3")
    assert killed.returncode == -signal.SIGKILL and killed.stdout.split() == ["0", "1"]
    other = run_python(code, JTCSE_CRASH_AT="elsewhere:1")
    assert other.returncode == 0 and other.stdout.split() == ["0", "1", "2", "3", "4"]
    crash_point("step")  # unset here: does nothing
