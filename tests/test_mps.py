"""handoff-run --mps: the CUDA MPS daemon is started around the jobs and stopped after, or the run goes on
time-sliced with one warning line where MPS is missing or cannot serve a client (the single-GPU host's sandbox)."""
import os
import stat
import sys

import pytest

from sip_core import mps


@pytest.fixture
def fake_control(tmp_path, monkeypatch):
    """A stand-in nvidia-cuda-mps-control on PATH that logs each call (its arguments and what it read)."""
    log = tmp_path / "calls.log"
    exe = tmp_path / "bin" / mps.CONTROL
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nif [ $# -eq 0 ]; then echo \"stdin:$(cat)\" >> {log}; else echo \"args:$*\" >> {log}; fi\n"
                   "echo \"${FAKE_MPS_MESSAGE:-}\" >&2\nexit ${FAKE_MPS_RC:-0}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    return log


OK_CLIENT = (sys.executable, "-c", "pass")
FAILING_CLIENT = (sys.executable, "-c", "import sys; sys.exit('CUDA error: MPS client failed to connect')")


def test_started_around_the_block_and_stopped_after(fake_control, capsys):
    with mps.daemon(True, probe=OK_CLIENT) as running:
        assert running
        assert fake_control.read_text().splitlines() == ["args:-d"]
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]
    assert "daemon started" in capsys.readouterr().out


def test_stopped_even_when_the_block_fails(fake_control):
    with pytest.raises(RuntimeError), mps.daemon(True, probe=OK_CLIENT):
        raise RuntimeError("a job crashed the runner")
    assert fake_control.read_text().splitlines()[-1] == "stdin:quit"


def test_a_client_that_cannot_connect_stops_the_daemon_and_warns(fake_control, capsys):
    with mps.daemon(True, probe=FAILING_CLIENT) as running:
        assert not running
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "MPS client failed to connect" in err and "time-sliced" in err


def test_a_daemon_that_does_not_start_only_warns(fake_control, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_MPS_RC", "1")
    with mps.daemon(True, probe=OK_CLIENT) as running:
        assert not running
    assert fake_control.read_text().splitlines() == ["args:-d"]  # nothing to stop
    assert "did not start" in capsys.readouterr().err


def test_a_daemon_left_running_by_an_earlier_call_is_used_and_stopped(fake_control, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_RC", "1")
    monkeypatch.setenv("FAKE_MPS_MESSAGE", "An instance of this daemon is already running")
    with mps.daemon(True, probe=OK_CLIENT) as running:
        assert running
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]


def test_missing_binary_or_disabled(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    with mps.daemon(True) as running:
        assert not running
    assert "not found" in capsys.readouterr().err
    with mps.daemon(False) as running:
        assert not running
    assert capsys.readouterr().err == ""


def test_handoff_run_with_mps_wraps_its_jobs_in_the_daemon(fake_control, tmp_path, monkeypatch, capsys):
    from sip_core.cli import main
    monkeypatch.setattr(mps, "CLIENT_PROBE", OK_CLIENT)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.json").write_text('{"jobs": [], "carry": []}')
    assert main(["handoff-run", "--jobs", "jobs.json", "--out", str(tmp_path / "out"), "--mps", "--gpus", "1"]) == 0
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]
    assert "daemon started" in capsys.readouterr().out


def test_handoff_run_uses_mps_by_default_only_where_the_host_shows_a_gpu(fake_control, tmp_path, monkeypatch, capsys):
    from sip_core import handoff
    from sip_core.cli import main
    monkeypatch.setattr(mps, "CLIENT_PROBE", OK_CLIENT)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.json").write_text('{"jobs": [], "carry": []}')
    run = ["handoff-run", "--jobs", "jobs.json", "--out", str(tmp_path / "out"), "--gpus", "1"]
    monkeypatch.setattr(handoff, "visible_gpus", lambda: [])  # a CPU dry run: no daemon, no warning
    assert main(run) == 0 and not fake_control.exists() and capsys.readouterr().err == ""
    monkeypatch.setattr(handoff, "visible_gpus", lambda: ["0"])
    assert main(run + ["--no-mps"]) == 0 and not fake_control.exists()
    assert main(run) == 0
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]
    assert "daemon started" in capsys.readouterr().out


def test_the_command_line_runs_a_command_under_the_daemon_and_returns_its_status(fake_control, monkeypatch):
    # the default client probe needs CUDA: here it fails, so the daemon is stopped and the command runs time-sliced
    monkeypatch.setattr(mps, "CLIENT_PROBE", FAILING_CLIENT)
    assert mps.main([sys.executable, "-c", "import sys; sys.exit(3)"]) == 3
    assert fake_control.read_text().splitlines() == ["args:-d", "stdin:quit"]
    assert mps.main([]) == 2
