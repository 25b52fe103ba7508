"""Every ``python -m core`` edge of issue 30: writes that never destroy (F1-F4, F19), arguments checked
before any server or measurement starts (F15-F18), and one error boundary (F20): one line, a
non-zero exit, never a traceback."""
from __future__ import annotations

import json
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from app_server import TINY_MISSING, TINY_READY
from safetensors import SafetensorError

import core.cli
from core.cli import guarded, main

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "assets" / "tiny"
pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


# ---- export: nothing destroyed -----------------------------------------------------------------
def test_export_onto_its_target_is_refused_even_with_force(tmp_path, capsys):  # F1
    target = tmp_path / "target"
    shutil.copytree(TINY / "target", target)
    before = snapshot(target)
    for force in ([], ["--force"]):
        assert main(["export", "--target", str(target), "--drafter-weights", str(TINY / "eagle3-reference"),
                     str(target), *force]) == 2
        assert "target model" in one_error_line(capsys)
    assert snapshot(target) == before


def test_export_onto_its_source_is_refused_even_with_force(tmp_path, capsys):  # F2
    source = tmp_path / "eagle3"
    shutil.copytree(TINY / "eagle3-reference", source)
    before = snapshot(source)
    for force in ([], ["--force"]):
        assert main(["export", "--drafter-weights", str(source), str(source), *force]) == 2
        assert "drafter being exported" in one_error_line(capsys)
    assert snapshot(source) == before


def test_export_never_writes_into_a_folder_with_weights_it_did_not_write(tmp_path, capsys):
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "model.safetensors").write_bytes(b"someone's weights")
    (other / "notes.txt").write_text("mine")
    assert main(["export", str(other), "--force"]) == 2
    assert "never writes there" in one_error_line(capsys)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    assert main(["export", str(notes)]) == 2
    assert "not empty" in one_error_line(capsys) and (notes / "todo.txt").read_text() == "mine"


@pytest.mark.parametrize("make", [lambda p: p.write_text("a file"), lambda p: None])
def test_export_to_a_file_or_under_one_is_one_line(tmp_path, capsys, make):  # F3
    file = tmp_path / "out"
    make(file)
    out = file if file.exists() else tmp_path / "out"
    if not file.exists():
        (tmp_path / "blocker").write_text("x")
        out = tmp_path / "blocker" / "sub"
    assert main(["export", str(out)]) == 2
    assert "is a file, not a folder" in one_error_line(capsys)


def limited_run(args: list[str], max_file_bytes: int) -> subprocess.CompletedProcess:
    """``python -m core ARGS`` where no file may grow past ``max_file_bytes`` (``ulimit -f``: a full disk)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True,
                          preexec_fn=limit, timeout=600, env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin",
                                                              "HOME": str(Path.home())})


def test_export_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):  # F4
    out = tmp_path / "vllm"
    run = limited_run(["export", str(out)], 64 * 1024)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("error: "), run.stderr  # after transformers' load bar
    assert not out.exists()


def test_a_trace_that_cannot_be_written_in_full_leaves_the_previous_one(tmp_path):  # F19
    trace = tmp_path / "run.jsonl"
    args = ["generate", "--preset", "tiny", "--drafter", "ngram", "--max-new-tokens", "48", "--trace", str(trace)]
    assert main([*args, "--prompt", "It is a truth"]) == 0  # the previous trace, in-process
    before = trace.read_bytes()
    assert len(before) > 8192
    run = limited_run([*args, "--prompt", "我爱"], 4096)
    assert run.returncode == 1 and "could not write the trace" in run.stderr and "Traceback" not in run.stderr
    assert trace.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["run.jsonl"]


# ---- arguments checked before anything starts ------------------------------------------------------
@pytest.mark.parametrize("flags, said", [
    (["--pause", "-1"], "--pause"), (["--pause", "nan"], "--pause"), (["--port", "70000"], "--port"),  # F15
    (["--prompts", "/dev/zero"], "larger than"),  # F17
])
def test_serve_metrics_checks_its_arguments_first(capsys, flags, said):
    assert main(["serve-metrics", *flags]) == 2
    assert said in one_error_line(capsys)


def test_serve_metrics_on_a_busy_port_is_one_line(capsys):  # F16
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve-metrics", "--port", str(port), "--rounds", "1"]) == 2
    assert f"cannot listen on 127.0.0.1 port {port}" in one_error_line(capsys)


def test_bench_checks_prompts_and_out_before_it_runs(tmp_path, capsys):  # F17, F18
    assert main(["bench", "--prompts", "/dev/zero"]) == 2
    assert "larger than" in one_error_line(capsys)
    file = tmp_path / "bench-out"
    file.write_text("not a folder")
    assert main(["bench", "--out", str(file), "--drafters", "none"]) == 2
    assert "is a file, not a folder" in one_error_line(capsys)


def test_the_serve_metrics_url_brackets_an_ipv6_address():
    from core.serving.serve_metrics import url

    assert url("::1", 9415) == "http://[::1]:9415/metrics" and url("127.0.0.1", 9) == "http://127.0.0.1:9/metrics"


# ---- one error boundary --------------------------------------------------------------------------
@pytest.mark.parametrize("error, status", [
    (KeyboardInterrupt(), 130), (FileNotFoundError(2, "No such file or directory", "x.json"), 1),
    (json.JSONDecodeError("Expecting value", "{", 0), 1), (KeyError("lm_head.weight"), 1),
    (SafetensorError("Error while deserializing header: HeaderTooLarge"), 1), (ValueError("two\nlines"), 1),
])
def test_the_error_boundary_is_one_line(capsys, error, status):
    def command():
        raise error

    assert guarded(command) == status
    one_error_line(capsys)


def test_ctrl_c_during_generate_is_one_line(monkeypatch, capsys):  # F20
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(core.cli, "run_generate", interrupted)
    assert main(["generate", "--prompt", "x"]) == 130
    assert one_error_line(capsys) == "error: interrupted"


def test_ctrl_c_in_a_real_run_is_one_line():
    # SIGINT as a terminal gives it: a runner that starts tests in the background (where the shell
    # ignores SIGINT, and children inherit that) must not make the bench deaf to it
    proc = subprocess.Popen([sys.executable, "-m", "core", "bench", "--drafters", "none,ngram", "--repeats", "50"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = ""
        while not line.startswith("[") and proc.poll() is None:  # "[1/800] repeat 1, prompt 1": it measures
            line = proc.stderr.readline()
        assert proc.poll() is None, "the bench ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        assert proc.wait(60) == 130
    finally:
        proc.kill()
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "error: interrupted", err


def test_1_new_token_is_singular():
    from core.common.errors import counted

    assert counted(1, "new token") == "1 new token" and counted(2, "new token") == "2 new tokens"


def test_the_monitor_has_one_number_in_the_docs():
    app = re.search(r"^### (\d+)\. Production monitor", (ROOT / "docs" / "app.md").read_text(), re.M)
    production = re.search(r"^## The Production monitor \(the app's view (\d+)", (ROOT / "docs" / "production.md")
                           .read_text(), re.M)
    assert app and production and app.group(1) == production.group(1)
