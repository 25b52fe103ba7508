"""Model and drafter folders are checked before anything is built (issue 30, F11-F14): crafted folders
with bad or absurd configs, layer ids or a d2t out of range, missing, extra or wrong-shape tensors,
symlinks out of the folder, huge headers, and weights that do not fit the architecture. Each is a
one-line UserError naming what is wrong; a property test generates such folders."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import psutil
import pytest
import torch
from app_server import TINY_MISSING, TINY_READY
from safetensors.torch import load_file, save_file

from core import UserError
from core.drafters.base import DraftShape
from core.drafters.checkpoint import checkpoint_config, checkpoint_weights, write_checkpoint
from core.drafters.weights import load_folder
from core.models.loading import load_model

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "assets" / "tiny"
pytestmark = [pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)]


@pytest.fixture(scope="module")
def target():
    return load_model(str(TINY / "target"), "cpu")


def crafted(tmp_path: Path, source: str, edit_config=None, edit_tensors=None) -> Path:
    """A copy of ``assets/tiny/<source>`` with its config and tensors edited."""
    folder = tmp_path / f"crafted-{source}"
    shutil.copytree(TINY / source, folder)
    if edit_config:
        config = json.loads((folder / "config.json").read_text())
        edit_config(config)
        (folder / "config.json").write_text(json.dumps(config))
    if edit_tensors:
        tensors = load_file(str(folder / "model.safetensors"))
        edit_tensors(tensors)
        save_file(tensors, str(folder / "model.safetensors"))
    return folder


def build(folder: Path, kind: str, target):
    """The drafter of ``kind`` built from ``folder`` for the tiny target (what --drafter-weights does)."""
    from core.drafters.eagle import Eagle3Drafter, EagleDrafter
    from core.drafters.medusa import MedusaDrafter

    cls = {"eagle": EagleDrafter, "eagle3": Eagle3Drafter, "medusa": MedusaDrafter}[kind]
    return cls(DraftShape(1, 3), target, str(folder))


def one_line_error(folder: Path, kind: str, target) -> str:
    with pytest.raises(UserError) as caught:
        build(folder, kind, target)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 600, message
    return message


def net(**fields):
    return lambda config: config["net"].update(fields)


def drop(name):
    return lambda tensors: tensors.pop(name)


CASES = [  # (name, source, config edit, tensor edit, what the message says)
    ("hidden 10^6", "eagle3", net(hidden_size=10**6), None, "hidden_size"),
    ("hidden not the target's", "eagle3", net(hidden_size=128), None, "not the target's"),
    ("layer id out of range", "eagle3", net(target_layers=[1, 2, 99]), None, "target_layers"),
    ("negative layer id", "eagle", net(target_layers=[-1]), None, "target_layers"),
    ("heads do not divide", "eagle3", net(num_attention_heads=3), None, "num_attention_heads"),
    ("absurd draft vocab", "eagle3", net(draft_vocab_size=10**9), None, "draft_vocab_size"),
    ("draft vocab larger than the target's", "eagle3", net(draft_vocab_size=9000), None, "draft_vocab"),
    ("NaN rope theta", "eagle3", net(rope_theta=float("nan")), None, "rope_theta"),
    ("a size that is true", "eagle", net(intermediate_size=True), None, "intermediate_size"),  # found by hypothesis
    ("a yes that is 1", "medusa", lambda c: c["heads"].update(own_lm_head=1), None, "own_lm_head"),
    ("unknown net field", "eagle", net(bogus=1), None, "bogus"),
    ("no net", "eagle", lambda c: c.pop("net"), None, "net"),
    ("medusa with 100 heads", "medusa", lambda c: c["heads"].update(num_heads=100), None, "num_heads"),
    ("a draft_vocab id out of range", "eagle3", None, lambda t: t["draft_vocab"].__setitem__(0, 99_999), "draft_vocab"),
    ("a missing tensor", "eagle3", None, drop("norm.weight"), "missing tensors: norm.weight"),
    ("an unexpected tensor", "eagle", None, lambda t: t.update(extra=torch.zeros(2)), "unexpected tensors: extra"),
    ("a wrong-shape tensor", "medusa", None, lambda t: t.update({"blocks.0.linear.weight": torch.zeros(3, 3)}),
     "wrong shape"),
]


@pytest.mark.parametrize("name, source, edit_config, edit_tensors, said", CASES, ids=[c[0] for c in CASES])
def test_a_crafted_drafter_folder_is_one_line(tmp_path, target, name, source, edit_config, edit_tensors, said):
    kind = "eagle3" if source.startswith("eagle3") else source
    folder = crafted(tmp_path, source, edit_config, edit_tensors)
    assert said in one_line_error(folder, kind, target)


@pytest.mark.parametrize("config_text, said", [
    ("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object"), (" " * (5 << 20), "larger than")])
def test_a_broken_config_file_is_one_line(tmp_path, target, config_text, said):
    folder = crafted(tmp_path, "eagle3")
    (folder / "config.json").write_text(config_text)
    assert said in one_line_error(folder, "eagle3", target)


@pytest.mark.parametrize("header", [struct.pack("<Q", 2**40) + b"{}", struct.pack("<Q", 10) + b"garbage!!!",
                                    b"\x01"])
def test_a_broken_safetensors_file_is_one_line(tmp_path, target, header):
    folder = crafted(tmp_path, "eagle3")
    (folder / "model.safetensors").write_bytes(header)
    assert "safetensors" in one_line_error(folder, "eagle3", target)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path, target):
    folder = crafted(tmp_path, "eagle3")
    outside = tmp_path / "elsewhere.safetensors"
    (folder / "model.safetensors").rename(outside)
    (folder / "model.safetensors").symlink_to(outside)
    assert "symlink to outside the folder" in one_line_error(folder, "eagle3", target)


@pytest.fixture
def vllm_folder(tmp_path, target):
    """The reference-layout drafter written in vLLM's layout (what ``export`` writes)."""
    lab, state = load_folder(TINY / "eagle3-reference", "eagle3", target.model)
    head = target.model.get_output_embeddings().weight.detach()
    text = target.model.config.get_text_config()
    out = tmp_path / "vllm"
    write_checkpoint(out, checkpoint_config(lab, text, head.shape[0]), checkpoint_weights(state, head), "card")
    return out


@pytest.mark.parametrize("edit, said", [
    (lambda t, c: t["d2t"].__setitem__(0, 10**6), "d2t maps draft tokens outside"),
    (lambda t, c: t.pop("lm_head.weight"), "lm_head.weight is missing"),
    (lambda t, c: c.update(eagle_aux_hidden_state_layer_ids=[1, 2, 40]), "target_layers"),
    (lambda t, c: c.update(hidden_size="big"), "hidden_size"),
    (lambda t, c: c.pop("rms_norm_eps"), "rms_norm_eps"),
])
def test_a_crafted_vllm_checkpoint_is_one_line(vllm_folder, target, edit, said):
    tensors = load_file(str(vllm_folder / "model.safetensors"))
    config = json.loads((vllm_folder / "config.json").read_text())
    edit(tensors, config)
    save_file(tensors, str(vllm_folder / "model.safetensors"))
    (vllm_folder / "config.json").write_text(json.dumps(config))
    assert said in one_line_error(vllm_folder, "eagle3", target)


def target_copy(tmp_path: Path, **edits) -> Path:
    folder = tmp_path / "target"
    shutil.copytree(TINY / "target", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(edits)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("edits, said", [
    (dict(hidden_size=10**6), "hidden_size"),  # F12
    (dict(vocab_size=-5), "vocab_size"),
    (dict(num_hidden_layers=100_000), "num_hidden_layers"),  # F13: refused at once, not built for minutes
    (dict(hidden_size=65_536, intermediate_size=500_000, num_hidden_layers=1_000), "GiB"),  # the memory estimate
    (dict(architectures=["BertModel"], model_type="bert"), "missing keys"),  # F14: weights that did not load
])
def test_a_crafted_target_folder_is_one_line(tmp_path, edits, said):
    with pytest.raises(UserError) as caught:
        load_model(str(target_copy(tmp_path, **edits)), "cpu")
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_a_target_with_a_symlink_out_is_refused(tmp_path):
    folder = target_copy(tmp_path)
    outside = tmp_path / "weights.safetensors"
    (folder / "model.safetensors").rename(outside)
    (folder / "model.safetensors").symlink_to(outside)
    with pytest.raises(UserError, match="symlink to outside the folder"):
        load_model(str(folder), "cpu")


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                    max_size=4), max_leaves=8)
NET_FIELDS = ("target_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
              "max_position_embeddings", "rope_theta", "rms_norm_eps", "output_norm", "draft_vocab_size", "layout")
SIZES = st.sampled_from([-1, 0, 1, 3, 64, 256, 257, 704, 8000, 10**6, 2**40])


@settings(max_examples=40)
@given(data=st.data())
def test_any_drafter_folder_gives_a_drafter_or_one_line(tmp_path_factory, target, data):
    """Generated configs (edited fields, random JSON) and tensors (dropped, reshaped, extra):
    a drafter or one UserError line, never a traceback, and memory stays bounded."""
    source = data.draw(st.sampled_from(["eagle", "eagle3", "eagle3-reference", "medusa"]))
    kind = "eagle3" if source.startswith("eagle3") else source
    part = "heads" if kind == "medusa" else "net"
    edits = data.draw(st.dictionaries(st.sampled_from(NET_FIELDS + ("num_heads", "own_lm_head")),
                                      SIZES | ANY_JSON | st.lists(SIZES, max_size=4), max_size=3))
    tensor_edit = data.draw(st.sampled_from(["none", "drop", "extra", "reshape", "ids"]))

    def edit_tensors(tensors):
        name = sorted(tensors)[0]
        if tensor_edit == "drop":
            tensors.pop(name)
        elif tensor_edit == "extra":
            tensors["extra.weight"] = torch.zeros(3)
        elif tensor_edit == "reshape":
            tensors[name] = tensors[name].reshape(-1)[:5].clone()
        elif tensor_edit == "ids" and "draft_vocab" in tensors:
            tensors["draft_vocab"][-1] = data.draw(st.sampled_from([-3, 8000, 2**40]))

    folder = crafted(tmp_path_factory.mktemp("prop"), source, lambda c: c[part].update(edits), edit_tensors)
    before = psutil.Process().memory_info().rss
    try:
        build(folder, kind, target)
    except UserError as e:
        assert "\n" not in str(e) and len(str(e)) < 600
    assert psutil.Process().memory_info().rss - before < 512 * 2**20


@settings(max_examples=25)
@given(edits=st.dictionaries(st.sampled_from(["hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads",
                                              "num_key_value_heads", "intermediate_size", "max_position_embeddings"]),
                             SIZES | ANY_JSON, min_size=1, max_size=2))
def test_any_target_config_gives_a_model_or_one_line(tmp_path_factory, edits):
    folder = tmp_path_factory.mktemp("target") / "t"
    folder.mkdir()
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TINY / "target" / name, folder)
    (folder / "model.safetensors").symlink_to(TINY / "target" / "model.safetensors")  # refused if reached
    config = json.loads((folder / "config.json").read_text())
    config.update(edits)
    (folder / "config.json").write_text(json.dumps(config))
    before = psutil.Process().memory_info().rss
    with pytest.raises(UserError) as caught:
        load_model(str(folder), "cpu")
    assert "\n" not in str(caught.value)
    assert psutil.Process().memory_info().rss - before < 512 * 2**20
