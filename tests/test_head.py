"""The LM head apart from the body: the same logits as the model's own forward, only where needed."""
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from core import DecodeRequest, build_decoder
from core.runtime.acceptance import TargetView
from core.runtime.forward import chain_parents, run_segment
from core.runtime.head import LMHead
from core.runtime.kv_cache import PagedKVCache
from core.runtime.tree import DraftTree

pytestmark = pytest.mark.usefixtures("one_thread")


def body_and_head(model, ids):
    """Logits of ``ids`` as one segment: the body through the paged cache, then ``LMHead``."""
    kv = PagedKVCache.for_model(model, 8, 16).new_request()
    try:
        out = run_segment(model, kv, ids, chain_parents(len(ids)))
        return LMHead.of(model)(out.last_hidden)
    finally:
        kv.release_all()


@torch.inference_mode()
def test_head_matches_the_plain_model_on_tiny(tiny):
    target, _ = tiny
    ids = target.tokenizer("我爱中国，我爱北京天安门。The cat sat on the mat").input_ids
    reference = target.model(torch.tensor([ids])).logits[0]
    logits = body_and_head(target.model, ids)
    assert logits.shape == reference.shape
    assert logits.argmax(-1).tolist() == reference.argmax(-1).tolist()
    torch.testing.assert_close(torch.softmax(logits, -1), torch.softmax(reference, -1), atol=1e-5, rtol=0)


@torch.inference_mode()
def test_head_applies_gemma_soft_capping():
    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=101, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                              final_logit_softcapping=0.5)
    model = Gemma3ForCausalLM(config).eval()
    ids = list(range(5, 17))
    reference = model(torch.tensor([ids])).logits[0]
    torch.testing.assert_close(body_and_head(model, ids), reference, atol=1e-5, rtol=1e-5)
    uncapped = LMHead(**{**LMHead.of(model).__dict__, "softcap": None})
    hidden = model.model(torch.tensor([ids])).last_hidden_state[0]
    assert not torch.allclose(uncapped(hidden), reference, atol=1e-3)  # the cap bends these logits


def test_target_view_reads_the_law_without_a_full_softmax_per_node():
    torch.manual_seed(1)
    tree = DraftTree()
    a = tree.add(3, -1, 0.5)
    tree.add(7, -1, 0.3)
    tree.add(2, a, 0.9)
    logits = torch.randn(4, 11) * 3
    for temperature in (0.0, 0.7):
        target = TargetView.of(logits.T.contiguous().T, temperature)  # the head's strided layout
        law = torch.softmax(logits / (temperature or 1.0), -1)
        assert target.argmax == tuple(logits.argmax(-1).tolist())
        expected = [law[p + 1, t].item() for p, t in zip(tree.parents, tree.tokens)]
        assert target.node_probs(tree) == pytest.approx(expected, abs=1e-6)
        torch.testing.assert_close(target.probs(3), law[3])
    assert TargetView.of(logits).node_probs(DraftTree()) == []


def test_decoding_computes_logits_only_for_verify_rows(tiny, monkeypatch):
    """The prefill runs the body only; each step's head covers exactly its verify rows."""
    rows = []
    call = LMHead.__call__
    monkeypatch.setattr(LMHead, "__call__", lambda self, hidden: rows.append(hidden.shape[0]) or call(self, hidden))
    decoder, ids = build_decoder(DecodeRequest.of("我爱中国，我爱北京，我爱中国，我爱", "tiny", "ngram", k=3, max_new_tokens=12))
    assert len(ids) > 4
    records = [r for r in decoder.steps(ids)]
    assert rows == [1 + len(r.nodes) for r in records] and max(rows) > 1
    assert all(0 <= n.target_prob <= 1 for r in records for n in r.nodes)


@torch.inference_mode()
def test_step_record_target_probs_are_the_plain_models(tiny):
    target, _ = tiny
    decoder, ids = build_decoder(DecodeRequest.of("我爱中国", "tiny", "draft", k=4, max_new_tokens=6))
    record = next(iter(decoder.steps(ids)))
    prompt = torch.tensor([ids])
    for node in record.nodes:
        path = [record.root.token] + _path_tokens(record.nodes, node.parent)
        law = torch.softmax(target.model(torch.cat([prompt, torch.tensor([path[1:]], dtype=torch.long)], 1)
                                         if len(path) > 1 else prompt).logits[0, -1], -1)
        assert node.target_prob == pytest.approx(law[node.token].item(), abs=2e-6)


def _path_tokens(nodes, index):
    """Tokens from the root's child down to node ``index`` (empty for the root)."""
    path = []
    while index >= 0:
        path.append(nodes[index].token)
        index = nodes[index].parent
    return path[::-1]


@torch.inference_mode()
def test_the_bf16_route_finds_the_float32_argmax_even_between_near_ties():
    """Rows built so that bf16 cannot tell the winner apart: several tokens whose logits differ from
    the largest by less than bf16's rounding. The bf16 route must rescore them and agree with the
    float32 argmax everywhere (without the rescoring it picks the wrong one in most rows)."""
    generator = torch.Generator().manual_seed(0)
    vocab, hidden = 40_000, 64
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    h = torch.randn(24, hidden, generator=generator) * 30
    for row in range(len(h)):  # near-twins of the best row, a hair above or below it
        best = int((weight @ h[row]).argmax())
        for j, eps in enumerate((1e-4, -1e-4, 3e-4, 2e-5)):
            twin = 1000 + 7 * row + j
            weight[twin] = weight[best] * (1 + eps) + 1e-5 * torch.randn(hidden, generator=generator)
    head = LMHead(weight, None, None, 1.0)
    reference = torch.mm(weight, h.T).T.argmax(-1).tolist()
    logits, argmax = head.greedy(h)
    assert list(argmax) == reference
    naive = logits.argmax(-1).tolist()
    assert naive != reference  # the bf16 logits alone get some rows wrong: the rescoring is what counts
    torch.testing.assert_close(logits.float(), torch.mm(weight, h.T).T, rtol=0.02, atol=0.02 * h.norm(dim=1).max().item())


def test_the_bf16_route_is_taken_only_where_it_pays(monkeypatch):
    small = LMHead(torch.zeros(100, 8), None, None, 1.0)
    monkeypatch.setenv("SDLAB_BF16_HEAD", "auto")
    assert not small.bf16_argmax  # a small head is cheap in float32
    monkeypatch.setenv("SDLAB_BF16_HEAD", "1")
    assert small.bf16_argmax and not LMHead(torch.zeros(100, 8), None, None, -1.0).bf16_argmax
    monkeypatch.setenv("SDLAB_BF16_HEAD", "0")
    assert not LMHead(torch.zeros(100_000, 8), None, None, 1.0).bf16_argmax


@pytest.mark.parametrize("drafter,k", [("none", 4), ("draft", 4), ("eagle3", 5), ("hybrid", 4)])
def test_greedy_decoding_through_the_bf16_route_is_the_target_alone(tiny, monkeypatch, drafter, k):
    """The engine's verify with the bf16 route forced on (``SDLAB_BF16_HEAD=1``) gives token for
    token what ``model.generate(do_sample=False)`` gives."""
    target, _ = tiny
    monkeypatch.setenv("SDLAB_BF16_HEAD", "1")
    prompt = "床前明月光，"
    decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", drafter, k, max_new_tokens=24))
    out = [token.token for record in decoder.steps(ids) for token in record.emitted]
    with torch.inference_mode():
        reference = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24,
                                           pad_token_id=target.tokenizer.pad_token_id)[0, len(ids):].tolist()
    assert out == reference[: len(out)] and len(out) == len(reference)
