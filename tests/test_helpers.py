"""The test helpers themselves: one environment rule for child processes, a jtcse-free probe that really
cannot import jtcse, the one-line-error check, background processes, and the automatic network_stub mark."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
from helpers.cli import (
    REPO,
    fork_cli,
    invoke_cli,
    one_error_line,
    run_cli,
    run_launch,
    run_python,
    start_python,
    subprocess_env,
)


def test_repo_is_this_checkout():
    assert REPO == Path(__file__).resolve().parents[1]
    assert (REPO / "jtcse" / "__init__.py").is_file()


def test_env_rule_puts_this_checkout_first_and_the_hub_offline(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    env = subprocess_env(JTCSE_EXTRA=3)
    assert env["PYTHONPATH"].split(":") == [str(REPO), "/somewhere/else"]
    assert (env["HF_HUB_OFFLINE"], env["OMP_NUM_THREADS"], env["JTCSE_EXTRA"]) == ("1", "1", "3")
    assert env["PATH"] == subprocess_env()["PATH"]  # the parent's PATH, never a hard-coded one


def test_child_imports_jtcse_from_this_checkout():
    result = run_python("import jtcse, os; print(os.path.dirname(jtcse.__file__)); print(os.environ['MARK'])", MARK="x")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(REPO / "jtcse"), "x"]


def test_hide_jtcse_really_hides_it(tmp_path):
    hidden = run_python("import jtcse.locking", hide_jtcse=True, cwd=REPO)  # cwd holds jtcse/: still hidden
    assert hidden.returncode == 1 and "ModuleNotFoundError: No module named 'jtcse' (hidden)" in hidden.stderr
    fine = run_python("import json, sys; print(sys.flags.isolated)", hide_jtcse=True, cwd=tmp_path)
    assert (fine.returncode, fine.stdout.strip()) == (0, "1")


def _done(returncode: int, stderr: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["jtcse"], returncode, "", stderr)


def test_one_error_line_accepts_exactly_one_error_line_and_exit_2():
    assert one_error_line(_done(2, "a warning\nError: bad input.\n")) == "Error: bad input."


@pytest.mark.parametrize(
    "returncode, stderr",
    [
        (2, 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\nError: bad input.\n'),
        (1, "Error: bad input.\n"),
        (2, "Error: one.\nError: two.\n"),
        (2, "usage: jtcse ...\n"),
    ],
    ids=["traceback", "exit-1", "two-lines", "no-line"],
)
def test_one_error_line_fails_otherwise(returncode, stderr):
    with pytest.raises(AssertionError):
        one_error_line(_done(returncode, stderr))


@pytest.mark.cli
def test_run_cli_runs_this_checkouts_command_line(tmp_path):
    line = one_error_line(run_cli("index", "search", "--index", tmp_path, "-q", "hello", timeout=120))
    assert line.startswith(f"Error: {tmp_path} is not a jtcse index directory")


@pytest.mark.cli
@pytest.mark.slow
def test_invoke_cli_answers_as_the_child_process_does(tmp_path):
    """Same exit status, stdout and stderr as ``run_cli`` for a refused command, a warning and ``--help``; the
    environment and working folder are the call's alone."""
    args = ("index", "build", "-i", tmp_path / "missing.txt", "--index", tmp_path / "i", "-o", tmp_path / "i")
    for call in (args, ("train", "--lr", "1e-3", "--learning-rate", "2e-3"), ("--help",), ("encode", "--help")):
        child, here = run_cli(*call, timeout=120), invoke_cli(*call)
        assert (here.returncode, here.stdout, here.stderr) == (child.returncode, child.stdout, child.stderr), call
    before = (dict(os.environ), os.getcwd())
    debug = invoke_cli("diagnose", tmp_path / "no-model", "-o", tmp_path / "d", cwd=tmp_path, JTCSE_DEBUG=1)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "model not found" in debug.stderr.splitlines()[-1]
    assert (dict(os.environ), os.getcwd()) == before


@pytest.mark.cli
def test_fork_cli_answers_as_invoke_cli_does_from_a_process_of_its_own(tmp_path):
    """A refused command: the same exit status, stdout and stderr as in this process, from another process; this
    process's environment and working folder are as they were. (Killed, frozen and interrupted children, and one
    under a file-size limit: tests/test_faults.py, tests/test_owned_by_content.py.)"""
    call = ("index", "search", "--index", tmp_path, "-q", "hello")
    before = (dict(os.environ), os.getcwd())
    child, here = fork_cli(*call, cwd=tmp_path), invoke_cli(*call, cwd=tmp_path)
    stdout, stderr = child.communicate(timeout=60)
    assert child.pid != os.getpid() and (child.returncode, stdout, stderr) == (
        here.returncode,
        here.stdout,
        here.stderr,
    )
    assert here.returncode == 2 and "is not a jtcse index directory" in stderr
    assert (dict(os.environ), os.getcwd()) == before


def test_invoke_cli_shows_warnings_logged_during_the_command(tmp_path):
    import logging

    from jtcse.commands import data

    logger = logging.getLogger("jtcse.test")
    original = data.register

    def noisy(app):
        original(app)

        @app.command("noisy")
        def _noisy():
            logger.info("not shown")
            logger.warning("shown on stderr")

    data.register = noisy
    try:
        import importlib

        import jtcse.cli

        importlib.reload(jtcse.cli)
        result = invoke_cli("noisy")
    finally:
        data.register = original
        importlib.reload(jtcse.cli)
    assert (result.returncode, result.stderr) == (0, "shown on stderr\n")


@pytest.mark.slow  # waits out a timeout
def test_a_launch_past_its_timeout_is_killed_with_every_process_it_started(tmp_path):
    """As a hung torchrun would be: the launcher and the rank it started (not holding the launcher's output) both go."""
    import time

    launcher = (  # like torchrun, it starts its rank in a session of its own
        "import subprocess, sys, time\n"
        "rank = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL, start_new_session=True)\n"
        "print(rank.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired) as stopped:
        run_launch(["python", "-c", launcher], timeout=1.5, cwd=tmp_path)
    stat = Path(f"/proc/{int(stopped.value.output.split()[0])}/stat")
    for _ in range(100):  # SIGKILL is delivered when the rank next runs: a moment
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.02)
    else:
        pytest.fail("the launcher's rank outlived it")
    assert run_launch(["python", "-c", "print('ok')"]).stdout == "ok\n"


def test_start_python_talks_to_a_background_child():
    proc = start_python("import os; print(input()[::-1], os.environ['MARK'])", MARK="y")
    stdout, stderr = proc.communicate("abc\n", timeout=60)
    assert (proc.returncode, stdout, stderr) == (0, "cba y\n", "")


def test_stub_fixtures_mark_their_tests_network_stub(request, stub_cert):
    assert request.node.get_closest_marker("network_stub") is not None


def test_plain_tests_are_not_marked_network_stub(request):
    assert request.node.get_closest_marker("network_stub") is None


def test_the_stand_in_server_lives_with_the_test_tools_not_the_rtt_backends():
    assert importlib.util.find_spec("jtcse.rtt.stub_server") is None
    assert importlib.util.find_spec("jtcse.testing.translate_stub") is not None


@pytest.mark.xdist_group("this_group")
def test_an_xdist_group_reaches_the_scheduler(request):
    """Under ``--dist loadgroup`` (scripts/test.sh) a grouped test's node id carries its group, which is what sends
    the group to one worker; pytest 9.2 with pytest-xdist 3.8 dropped it without a word (setup.py's pin)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not a --dist loadgroup worker")
    assert request.node.nodeid.endswith("@this_group")
