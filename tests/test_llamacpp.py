"""llama.cpp as the CPU peer (``core.llamacpp``) without llama.cpp: fake venvs (tests/fake_llamacpp.py)
whose ``bin/python`` is a small runner or the real runner under the lab's Python (``import llama_cpp``
fails there); setup's commands replaced by fast ones. The opt-in test at the end runs the real GGUF in
the real venv (``SDLAB_LLAMACPP=1``, after ``python -m core llamacpp setup``)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

import pytest
from fake_llamacpp import RUNNER, fake_venv, started
from fake_vllm import LAB_PYTHON, gone

import core.llamacpp.peer
from core.cli import main
from core.common.errors import UserError
from core.llamacpp import env
from core.llamacpp.client import LlamaCppError, LlamaCppRunner
from core.llamacpp.peer import LlamaCppPeer
from core.studies.bench import BenchConfig, markdown_table, run_bench

OFFLINE_PIP = [sys.executable, "-c", "import sys; sys.exit('pip: no network')"]
WHEEL = f"llama_cpp_python-{env.VERSION}-py3-none-linux_x86_64.whl"


@contextlib.contextmanager
def reaped_at_the_end(folder):
    """Kill the fake runners a test leaves running, so a failing test leaks no process."""
    try:
        yield
    finally:
        for pid in started(folder):
            if not gone(pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The lab's cache under ``tmp_path`` (the wheels folder with it)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---- the venv: stamp, setup, the kept wheel ---------------------------------------------------------
@pytest.mark.parametrize("stamp", ["[]", '"x"', "null", "{}", "not json",
                                   json.dumps({"package": 1, "llama_cpp": "0.3.36", "numpy": "2", "wheel": "w"}),
                                   json.dumps({"package": env.PACKAGE, "llama_cpp": "0.3.36"})])
def test_a_stamp_that_is_not_what_setup_writes_counts_as_no_setup(tmp_path, monkeypatch, capsys, stamp):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    assert env.ready()
    env.stamp_file().write_text(stamp)
    assert env.stamp() is None and not env.ready()
    assert main(["llamacpp", "status"]) == 1
    assert capsys.readouterr().out.startswith(f"no llama.cpp environment at {venv}: run `python -m core llamacpp setup`")


def test_a_stamp_of_another_version_is_not_ready(tmp_path, monkeypatch):
    fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    env.stamp_file().write_text(json.dumps({"package": "llama-cpp-python==0.0.1", "llama_cpp": "0.0.1",
                                            "numpy": "2", "wheel": "w"}))
    assert not env.ready() and "llama-cpp-python==0.0.1" in env.missing_reason()


def test_setup_installs_the_kept_wheel_alone_and_its_dependencies_from_the_index(cache):
    commands = [" ".join(c) for c in env.setup_commands(env.venv_dir())]
    assert any(c.endswith(f"install --no-index --find-links {env.wheels_dir()} {env.PACKAGE}") for c in commands)
    assert any("install --progress-bar on numpy" in c and "diskcache" in c and "jinja2" in c for c in commands)
    assert "--no-cache-dir" in env.wheel_command(cache) and env.PACKAGE in env.wheel_command(cache)
    assert "-DGGML_NATIVE=OFF" in env.CMAKE_ARGS and "-DGGML_AVX512=OFF" in env.CMAKE_ARGS


def test_a_setup_that_fails_leaves_the_working_venv_and_its_stamp(tmp_path, cache, monkeypatch, capsys):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    env.wheels_dir().mkdir(parents=True)
    (env.wheels_dir() / WHEEL).write_bytes(b"built before")
    before = files(venv)
    monkeypatch.setattr(env, "setup_commands", lambda folder, *_: [[sys.executable, "-m", "venv", "--without-pip",
                                                                     str(folder)], OFFLINE_PIP])
    assert main(["llamacpp", "setup"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: `") and "exited with status 1" in err[-1] and "is unchanged" in err[-1]
    assert any(line.startswith("reusing the built wheel") for line in err)  # the wheel is not built again
    assert files(venv) == before and env.ready()
    assert sorted(p.name for p in venv.parent.iterdir()) == ["cache", "venv"]  # the partial build removed


def fake_wheel_build(calls: list, fails: bool = False):
    """``env.wheel_command``'s stand-in: writes a wheel into its folder (or fails), counting its runs."""
    def command(out, *_):
        calls.append(out)
        if fails:
            return OFFLINE_PIP
        return [sys.executable, "-c", f"import pathlib; p = pathlib.Path({str(out)!r}); p.mkdir(parents=True); "
                                      f"(p / {WHEEL!r}).write_bytes(b'wheel')"]
    return command


def test_a_missing_wheel_is_built_once_then_kept(cache, monkeypatch):
    calls = []
    monkeypatch.setattr(env, "wheel_command", fake_wheel_build(calls))
    built = env.ensure_wheel(log=lambda line: None)
    assert built == env.wheels_dir() / WHEEL and built.read_bytes() == b"wheel"
    assert env.ensure_wheel(log=lambda line: None) == built and len(calls) == 1  # kept: not built again
    assert sorted(p.name for p in env.wheels_dir().iterdir()) == [WHEEL]  # its build folder removed


def test_a_wheel_build_that_fails_leaves_nothing_and_names_its_step(tmp_path, cache, monkeypatch, capsys):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "venv"))
    calls = []
    monkeypatch.setattr(env, "wheel_command", fake_wheel_build(calls, fails=True))
    assert main(["llamacpp", "setup"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: `python -c") and err[-1].endswith("nothing was installed")
    assert list(env.wheels_dir().iterdir()) == [] and not (tmp_path / "venv").exists()


# ---- the GGUF -----------------------------------------------------------------------------------------
@pytest.fixture
def gguf_packages(tmp_path, monkeypatch):
    """A stand-in for the Gemma GGUF packages (two chunks) on the path, gone from ``sys.modules`` after
    (the real one, if a test imported it before, comes back); the GGUF's bytes."""
    import hashlib

    from core.models import gemma

    whole = b"GGUF" * 1000 + b"tail"
    package = tmp_path / "packages" / gemma.PACKAGE
    (package / "data").mkdir(parents=True)
    (package / "data" / "a").write_bytes(whole[:4000])
    (package / "data" / "b").write_bytes(whole[4000:])
    (package / "__init__.py").write_text(
        "from pathlib import Path\nMODEL_NAME = 'model.gguf'\n"
        f"EXPECTED_SHA256 = {hashlib.sha256(whole).hexdigest()!r}\n"
        "def chunk_paths():\n    return [Path(__file__).parent / 'data' / n for n in ('a', 'b')]\n"
        "def verify_chunks():\n    pass\n")
    monkeypatch.delitem(sys.modules, gemma.PACKAGE, raising=False)
    monkeypatch.syspath_prepend(str(package.parent))
    yield whole
    sys.modules.pop(gemma.PACKAGE, None)


def test_the_kept_gguf_is_assembled_once_and_again_when_its_sha256_does_not_match(cache, gguf_packages):
    from core.models import gemma

    lines = []
    kept = gemma.kept_gguf(lines.append)
    assert kept == cache / "speculative-decoding-lab" / "gemma-270m-gguf" / "model.gguf"
    assert kept.read_bytes() == gguf_packages and lines
    lines.clear()
    assert gemma.kept_gguf(lines.append) == kept and lines == []  # kept: checked, not assembled again
    kept.write_bytes(b"damaged")
    assert gemma.kept_gguf(lines.append).read_bytes() == gguf_packages and lines
    assert sorted(p.name for p in kept.parent.iterdir()) == ["model.gguf"]  # no assembly folder left


# ---- the runner and the peer ------------------------------------------------------------------------
def test_without_the_venv_the_runner_is_refused_with_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "absent"))
    with pytest.raises(UserError, match="python -m core llamacpp setup"):
        LlamaCppRunner(tmp_path / "model.gguf")


def test_a_load_that_fails_leaves_no_runner_behind(tmp_path, monkeypatch):
    """The real runner under the lab's Python: ``load`` raises (no llama_cpp), the runner is killed and
    reaped before the error leaves ``start``."""
    venv = fake_venv(tmp_path / "venv", LAB_PYTHON, monkeypatch)
    runner = LlamaCppRunner(tmp_path / "model.gguf", "lookup", threads=1)
    with reaped_at_the_end(venv):
        with pytest.raises(LlamaCppError, match="^llama.cpp: ModuleNotFoundError: No module named 'llama_cpp'"):
            runner.start()
        assert runner.process is None
        assert [gone(pid) for pid in started(venv)] == [True]


def test_a_runner_killed_between_requests_is_an_error_with_its_signal(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    with reaped_at_the_end(venv), LlamaCppRunner(tmp_path / "model.gguf", threads=1) as runner:
        assert runner.generate([2, 5, 6, 7], 8).tokens == [5, 6, 7]
        os.kill(started(venv)[0], signal.SIGKILL)
        runner.process.wait()
        with pytest.raises(LlamaCppError, match=r"^the llama.cpp runner exited with status -9 \(SIGKILL\)"):
            runner.generate([2, 5], 8)


class Target:
    """What the peer reads of the lab's target: its end tokens."""
    eos_ids = frozenset({1, 106})


def test_a_peer_whose_second_load_fails_closes_the_first(tmp_path, monkeypatch):
    """``none`` loads, ``lookup`` is refused by the fake runner: the error leaves ``start`` with no runner
    left, neither the refused one nor the one already loaded."""
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    monkeypatch.setattr(core.llamacpp.peer, "load_model", lambda *args, **kw: Target())
    monkeypatch.setattr(core.llamacpp.peer.gemma, "kept_gguf", lambda log=None: tmp_path / "model.gguf")
    with reaped_at_the_end(venv):
        with pytest.raises(LlamaCppError, match="cannot load lookup"):
            LlamaCppPeer("gemma-270m", k=4, threads=1, max_new_tokens=8, log=lambda line: None).start()
        assert len(started(venv)) == 2 and all(gone(pid) for pid in started(venv))


# ---- the bench --------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, refusal", [
    (["--preset", "gemma-270m", "--temperature", "0.7"], "greedy"),
    (["--preset", "tiny"], "use --preset gemma-270m"),
    (["--preset", "gemma-270m", "--target", "assets/tiny/target"], "leave out --target"),
])
def test_bench_refuses_llamacpp_where_it_cannot_compare(tmp_path, monkeypatch, capsys, flags, refusal):
    venv = fake_venv(tmp_path / "venv", RUNNER, monkeypatch)
    assert main(["bench", "--compare-llamacpp", "--drafters", "none", "--repeats", "1", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and refusal in err and len(err.splitlines()) == 1
    assert started(venv) == []  # refused before llama.cpp was started


def test_bench_without_the_venv_names_the_setup_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(env.VENV_VARIABLE, str(tmp_path / "absent"))
    assert main(["bench", "--compare-llamacpp", "--preset", "gemma-270m", "--drafters", "none"]) == 2
    assert "python -m core llamacpp setup" in capsys.readouterr().err
    with pytest.raises(UserError, match="--preset gemma-270m"):
        run_bench(BenchConfig(drafters=("none",), compare_llamacpp=True), log=lambda _: None)


def test_the_table_shows_llamacpp_against_the_labs_none_and_how_often_its_text_is_the_labs():
    row = {"tokens_per_s": 30.0, "speedup": 1.5, "min_speedup": 1.1, "speedup_by_language": {"en": 1.5},
           "tau": None, "acceptance_rate": None, "per_position_acceptance": None, "identical_to_baseline": False}
    result = {"preset": "gemma-270m", "prompts": 32, "max_new_tokens": 64, "repeats": 1, "k": 4, "tree": None,
              "torch_threads": 2, "drafters": {"none": {**row, "identical_to_baseline": True}}, "hf": {},
              "llamacpp": {"llamacpp:none": {**row, "identical_prompts": 20},
                           "llamacpp:lookup": {**row, "speedup": 0.8, "identical_prompts": 19,
                                               "identical_to_llamacpp_none": 32}},
              "llamacpp_info": {"version": "0.3.36", "gguf": "gemma-3-270m-q4_k_m.gguf", "threads": 2,
                                "timing": "warm", "lookup": {"num_pred_tokens": 4, "max_ngram_size": 2},
                                "skipped": {"draft": "no GGUF draft"}}}
    text = markdown_table(result)
    assert "| llamacpp:none | 30.0 | 1.50× |" in text and "| llamacpp:lookup | 30.0 | 0.80× |" in text
    assert "| llamacpp:draft | not run: no GGUF draft |" in text
    assert ("`llamacpp:none` on 20 of 32; `llamacpp:lookup` on 19 of 32; `llamacpp:lookup` gives `llamacpp:none`'s "
            "tokens on 32 of 32") in text
    assert "speedups are over the lab's `none`" in text


# ---- opt-in: the real GGUF in the real venv ---------------------------------------------------------
def real_ready() -> bool:
    from core.models import gemma

    return os.environ.get("SDLAB_LLAMACPP") == "1" and env.ready() and gemma.available()


@pytest.mark.skipif(not real_ready(), reason="the llama.cpp tier is opt-in: SDLAB_LLAMACPP=1 (after "
                                             "`python -m core llamacpp setup`, with the gemma-270m preset)")
def test_llamacpp_reads_the_labs_token_ids_and_its_lookup_gives_its_plain_tokens():
    """The same Gemma vocabulary: llama.cpp's ids for a prompt are the lab's tokenizer's; greedy tokens come
    back within the budget; prompt lookup gives plain llama.cpp's tokens on these prompts. Not on every
    prompt: llama.cpp's forward of several tokens (a verify) does not give the logits of its forward of one,
    and near-ties flip (21 of 32 chat prompts identical at 64 tokens on an AVX2 build; docs/llamacpp.md)."""
    from core.models import gemma
    from core.models.loading import load_model, resolve_preset
    from core.models.prompts import load_prompts

    target = load_model(resolve_preset("gemma-270m").target, "cpu")
    gguf = gemma.kept_gguf()
    prompts = load_prompts("chat")[:2] + load_prompts("chat")[16:18]  # two Chinese, two English
    with LlamaCppRunner(gguf, "none", threads=2, stop_ids=target.eos_ids) as plain, \
            LlamaCppRunner(gguf, "lookup", threads=2, num_pred_tokens=4, stop_ids=target.eos_ids) as lookup:
        assert plain.eog_ids == sorted(target.eos_ids)
        for prompt in prompts:
            ids = target.tokenizer(prompt).input_ids
            assert plain.tokenize(prompt) == ids
            tokens = plain.generate(ids, 24).tokens
            assert 0 < len(tokens) <= 24 and all(0 <= t < 262144 for t in tokens)
            assert lookup.generate(ids, 24).tokens == tokens
