"""``python -m core export --format vllm``: the tiny EAGLE-3 drafter in vLLM's checkpoint layout.

The checkpoint is read back into the lab's drafter (identical proposals on held-out prompts), and
its tensors, read by the names vLLM's ``llama_eagle3.py`` uses and run through that file's
computation written out here, give the lab drafter's logits."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from app_server import TINY_MISSING, TINY_READY
from safetensors.torch import load_file
from torch.nn import functional as F
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from core import UserError, generate
from core.cli import main
from core.models.prompts import load_prompts

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "assets" / "tiny" / "eagle3-reference"
pytestmark = [pytest.mark.skipif(not TINY_READY or not (SOURCE / "config.json").is_file(), reason=TINY_MISSING)]

MIDLAYER = {f"midlayer.{name}.weight" for name in (
    "input_layernorm", "hidden_norm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
    "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}


def export_tiny(tmp_path_factory, drafter: str) -> Path:
    """``python -m core export --drafter DRAFTER --preset tiny --format vllm`` into a fresh folder."""
    out = tmp_path_factory.mktemp("vllm") / f"tiny-{drafter}"
    assert main(["export", "--drafter", drafter, "--preset", "tiny", "--format", "vllm", str(out)]) == 0
    return out


def reloaded_runs(drafter: str, source: Path, exported: Path, chain: int) -> list:
    """The trained folder and its export on 3 held-out prompts, a chain and a tree: the same proposals (token,
    parent, draft probability) and the same text. Returns the runs with the export."""
    runs_of_export = []
    for prompt in load_prompts()[:3]:  # held-out prompts
        for shape in (dict(k=chain), dict(tree="3x3", eagle_nodes=8)):
            runs = [generate(prompt, preset="tiny", drafter=drafter, max_new_tokens=24, drafter_weights=str(w),
                             **shape) for w in (source, exported)]
            trained, reloaded = ([(n.token, n.parent, n.draft_prob) for step in r.steps for n in step.nodes]
                                 for r in runs)
            assert trained == reloaded and len(trained) > 10
            assert runs[0].tokens == runs[1].tokens
            runs_of_export.append(runs[1])
    return runs_of_export


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_tiny(tmp_path_factory, "eagle3")


def test_the_checkpoint_has_vllms_names_and_config_fields(exported):
    tensors = load_file(str(exported / "model.safetensors"))
    config = json.loads((exported / "config.json").read_text())
    assert set(tensors) == MIDLAYER | {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d"}
    hidden, draft_vocab = config["hidden_size"], config["draft_vocab_size"]
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["num_hidden_layers"] == 1
    assert tensors["midlayer.self_attn.q_proj.weight"].shape == (hidden, 2 * hidden)  # embeddings + feature
    assert tensors["fc.weight"].shape == (hidden, 3 * config["target_hidden_size"])
    assert tensors["lm_head.weight"].shape == (draft_vocab, hidden) and draft_vocab < config["vocab_size"]
    assert tensors["d2t"].shape == (draft_vocab,) and tensors["t2d"].dtype == torch.bool
    assert int(tensors["t2d"].sum()) == draft_vocab
    target_ids = torch.arange(draft_vocab) + tensors["d2t"]
    assert tensors["t2d"][target_ids].all()
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert (exported / "README.md").read_text().count("vllm serve") == 1


def test_the_exported_drafter_proposes_what_the_trained_one_does(exported):
    reloaded_runs("eagle3", SOURCE, exported, 4)


def rms(x, weight, eps):
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def vllm_logits(w: dict, config: dict, embedded: torch.Tensor, fused: torch.Tensor) -> torch.Tensor:
    """llama_eagle3.py's forward for one sequence, from the checkpoint's tensors: embedded [n, H],
    fused = fc(target aux states) [n, H] -> logits over the target vocabulary [n, vocab]."""
    eps, n, heads, kv = config["rms_norm_eps"], len(embedded), config["num_attention_heads"], config["num_key_value_heads"]
    x = torch.cat([rms(embedded, w["midlayer.input_layernorm.weight"], eps),
                   rms(fused, w["midlayer.hidden_norm.weight"], eps)], dim=-1)  # cat([embeds, hidden_states])
    q, k, v = (x @ w[f"midlayer.self_attn.{p}_proj.weight"].T for p in "qkv")
    q, k, v = q.view(n, heads, -1).transpose(0, 1), k.view(n, kv, -1).transpose(0, 1), v.view(n, kv, -1).transpose(0, 1)
    from transformers import LlamaConfig
    rope = LlamaRotaryEmbedding(LlamaConfig(hidden_size=config["hidden_size"], num_attention_heads=heads,
                                            rope_theta=config["rope_theta"]))
    cos, sin = rope(x, torch.arange(n)[None])
    q, k = apply_rotary_pos_emb(q[None], k[None], cos, sin)
    attended = F.scaled_dot_product_attention(q, k, v[None], is_causal=True)[0].transpose(0, 1).reshape(n, -1)
    h = attended @ w["midlayer.self_attn.o_proj.weight"].T + fused  # residual = hidden_states (norm after residual)
    m = rms(h, w["midlayer.post_attention_layernorm.weight"], eps)
    h = h + (F.silu(m @ w["midlayer.mlp.gate_proj.weight"].T) * (m @ w["midlayer.mlp.up_proj.weight"].T)) \
        @ w["midlayer.mlp.down_proj.weight"].T
    draft_logits = rms(h, w["norm.weight"], eps) @ w["lm_head.weight"].T
    logits = draft_logits.new_full((n, config["vocab_size"]), float("-inf"))
    logits[:, torch.arange(config["draft_vocab_size"]) + w["d2t"]] = draft_logits  # compute_logits
    return logits


def assert_same_logits(got: torch.Tensor, expected: torch.Tensor) -> None:
    """The lab's logits are vLLM's computation's: the same tokens left out (-inf), 1e-4 elsewhere, the same argmax."""
    finite = torch.isfinite(expected)
    assert torch.equal(finite, torch.isfinite(got))
    assert torch.allclose(got[finite], expected[finite], atol=1e-4)
    assert torch.equal(got.argmax(-1), expected.argmax(-1))


def test_vllms_computation_on_the_checkpoint_gives_the_lab_drafters_logits(exported, tiny):
    from core.drafters.base import DraftShape
    from core.drafters.eagle import Eagle3Drafter
    from core.runtime.tree import attention_mask, position_ids

    target, _ = tiny
    w = load_file(str(exported / "model.safetensors"))
    config = json.loads((exported / "config.json").read_text())
    net = Eagle3Drafter(DraftShape(1, 4), target, weights=str(SOURCE), half_products=False).net  # as trained
    ids = target.tokenizer("It is a truth universally acknowledged", return_tensors="pt").input_ids
    with torch.no_grad():
        hidden = target.model(ids, output_hidden_states=True).hidden_states
        aux = torch.cat([hidden[i][0] for i in config["eagle_aux_hidden_state_layer_ids"]], dim=-1)  # [n, 3H]
        fused = aux @ w["fc.weight"].T
        tokens = ids[0, 1:]  # pair (feature t, token t+1)
        n = len(tokens)
        embedded = target.model.get_input_embeddings().weight[tokens]
        expected = vllm_logits(w, config, embedded, fused[:n])
        parents = list(range(-1, n - 1))
        out = net(net.fuse_target([hidden[i][0, :n] for i in config["eagle_aux_hidden_state_layer_ids"]])[None],
                  tokens[None], position_ids(0, parents, n), attention_mask(0, parents, n), None)[0]
        got = net.target_logits(out)
    assert_same_logits(got, expected)


@pytest.mark.parametrize("drafter,way_out", [("eagle3", "--layout reference"),  # the lab's own layer
                                            ("peagle", "--placeholders shared")])  # a placeholder per depth
def test_the_labs_own_layout_is_refused_with_the_way_out(tmp_path, capsys, drafter, way_out):
    code = main(["export", "--drafter", drafter, "--preset", "tiny", "--drafter-weights",
                 str(ROOT / "assets" / "tiny" / drafter), str(tmp_path / "out")])
    assert code == 2 and way_out in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_with_its_own_lm_head_is_refused(exported, tiny):
    from core.drafters.checkpoint import read_checkpoint

    target, _ = tiny
    other_head = target.model.get_output_embeddings().weight.detach() + 0.01  # not the head exported
    with pytest.raises(UserError, match="lm_head"):
        read_checkpoint(exported, other_head)


def test_the_oracle_asks_the_lab_to_draft_as_vllm_does(exported):
    """vLLM drafts in float32 over the draft vocabulary alone (its d2t map): the oracle's request for
    the lab asks for the same, not for fp16 products or context columns."""
    from core.vllm.oracle import Method

    request = Method("eagle3", k=3, checkpoint=str(exported)).request("我爱中国", "tiny", 8)
    assert request.options.draft_precision == "float32" and request.options.draft_vocab_only is True
    assert not request.options.half_products


# ---- P-EAGLE: vLLM's EAGLE-3 with parallel drafting -------------------------------------------------------
PARALLEL_SOURCE = ROOT / "assets" / "tiny" / "peagle-reference"


@pytest.fixture(scope="module")
def exported_peagle(tmp_path_factory):
    return export_tiny(tmp_path_factory, "peagle")


def test_a_peagle_exports_with_vllms_parallel_drafting_fields(exported_peagle):
    tensors = load_file(str(exported_peagle / "model.safetensors"))
    config = json.loads((exported_peagle / "config.json").read_text())
    assert set(tensors) == MIDLAYER | {"fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d", "mask_hidden"}
    assert tensors["mask_hidden"].shape == (3 * config["target_hidden_size"],)
    assert config["ptd_token_id"] == 3  # tiny's padding token
    card = (exported_peagle / "README.md").read_text()
    assert card.startswith("# P-EAGLE") and '"parallel_drafting": true' in card


def test_the_exported_peagle_proposes_what_the_trained_one_does(exported_peagle):
    for run in reloaded_runs("peagle", PARALLEL_SOURCE, exported_peagle, 5):
        assert run.draft_forwards == sum(1 for step in run.steps if step.nodes)  # one forward a step


def test_vllms_masked_slots_give_the_lab_peagles_logits(exported_peagle, tiny):
    """vLLM's parallel drafting appends k-1 slots reading fc(mask_hidden) and the embedding of ptd_token_id after
    the real pairs, in the same causal forward: written out with vllm_logits, the lab's one drafting forward."""
    from core.drafters.base import DraftShape
    from core.drafters.peagle import PEagleDrafter

    target, _ = tiny
    w = load_file(str(exported_peagle / "model.safetensors"))
    config = json.loads((exported_peagle / "config.json").read_text())
    drafter = PEagleDrafter(DraftShape(1, 4), target, weights=str(PARALLEL_SOURCE), half_products=False)
    net, slots = drafter.net, 3
    ids = target.tokenizer("It is a truth universally acknowledged", return_tensors="pt").input_ids
    with torch.no_grad():
        hidden = target.model(ids, output_hidden_states=True).hidden_states
        layers = config["eagle_aux_hidden_state_layer_ids"]
        tokens = ids[0, 1:]
        n = len(tokens)
        fused = torch.cat([hidden[i][0] for i in layers], dim=-1)[:n] @ w["fc.weight"].T
        masked = (w["mask_hidden"] @ w["fc.weight"].T).expand(slots, -1)
        embed = target.model.get_input_embeddings().weight
        expected = vllm_logits(w, config, torch.cat([embed[tokens], embed[config["ptd_token_id"]].expand(slots, -1)]),
                               torch.cat([fused, masked]))[n - 1:]
        features, embedded = net.placeholders(net.fuse_target([hidden[i][0, n - 1] for i in layers]), slots)
        real = net.fuse_target([hidden[i][0, :n] for i in layers])
        everything = torch.cat([real, features])[None]
        positions = torch.arange(n + slots)[None]
        mask = torch.full((n + slots, n + slots), float("-inf")).triu(1)[None, None]
        out = net(everything, None, positions, mask, None,
                  embedded=torch.cat([embed[tokens], embedded])[None])[0, n - 1:]
        got = net.target_logits(out)
    assert_same_logits(got, expected)


def test_a_parallel_checkpoint_is_not_taken_for_an_eagle3(exported_peagle):
    with pytest.raises(UserError, match="peagle checkpoint, not eagle3"):
        generate("我爱中国", preset="tiny", drafter="eagle3", max_new_tokens=4,
                 drafter_weights=str(exported_peagle))


@pytest.mark.parametrize("broken", ["no ptd_token_id", "no mask_hidden", "mask_hidden of another size",
                                    "ptd_token_id outside the vocabulary"])
def test_a_broken_parallel_checkpoint_is_refused_by_name(exported_peagle, tmp_path, tiny, broken):
    from safetensors.torch import save_file

    from core.drafters.checkpoint import read_checkpoint

    target, _ = tiny
    out = tmp_path / "broken"
    out.mkdir()
    tensors = load_file(str(exported_peagle / "model.safetensors"))
    config = json.loads((exported_peagle / "config.json").read_text())
    if broken == "no ptd_token_id":
        del config["ptd_token_id"]
    elif broken == "no mask_hidden":
        del tensors["mask_hidden"]
    elif broken == "mask_hidden of another size":
        tensors["mask_hidden"] = tensors["mask_hidden"][:-1].clone()
    else:
        config["ptd_token_id"] = config["vocab_size"]
    save_file(tensors, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="mask_hidden"):
        read_checkpoint(out, target.model.get_output_embeddings().weight.detach())
