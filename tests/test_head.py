"""The LM head apart from the body: the same logits as the model's own forward, only where needed."""
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from core import DecodeRequest, build_decoder
from core.acceptance import TargetView
from core.forward import chain_parents, run_segment
from core.head import LMHead
from core.kv_cache import PagedKVCache
from core.tree import DraftTree

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
