"""The LM head apart from the body: the same logits as the model's own forward, only where needed."""
import os
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from core import DecodeRequest, build_decoder
from core.runtime.acceptance import TargetView
from core.runtime.forward import chain_parents, run_segment
from core.runtime.head import CheapHead, LMHead, _fastest, _int8_head, _near_the_top, cheap_head, head_route, outlier_channels
from core.runtime.kv_cache import PagedKVCache
from core.runtime.tree import DraftTree



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


ROUTES = ("bf16", "fp16", "int8")


def force(monkeypatch, route: str | None) -> None:
    """Take ``route`` for any float32 CPU head (None: the float32 head)."""
    for name in ROUTES:
        monkeypatch.setenv(f"SDLAB_{name.upper()}_HEAD", "1" if name == route else "0")


def near_ties(seed: int, vocab: int = 40_000, hidden: int = 64, rows: int = 24, scale: float = 30.0):
    """A head and hidden rows built so that a low-precision product cannot tell the winner apart:
    near-twins of each row's best token, a hair above or below it (closer than bf16's or fp16's
    rounding)."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    h = torch.randn(rows, hidden, generator=generator) * scale
    for row in range(len(h)):
        best = int((weight @ h[row]).argmax())
        for j, eps in enumerate((1e-4, -1e-4, 3e-4, 2e-5)):
            twin = 1000 + 7 * row + j
            weight[twin] = weight[best] * (1 + eps) + 1e-5 * torch.randn(hidden, generator=generator)
    return weight, h


@pytest.mark.parametrize("route", ROUTES)
@torch.inference_mode()
def test_a_cheap_route_finds_the_float32_argmax_even_between_near_ties(monkeypatch, route):
    """Rows where the cheap product alone picks the wrong token: the route must rescore the tokens
    its bound leaves open and agree with the float32 argmax everywhere."""
    force(monkeypatch, route)
    weight, h = near_ties(0)
    head = LMHead(weight, None, None, 1.0)
    if head_route(weight) != route:
        pytest.skip(f"this torch or CPU has no {route} route")
    reference = torch.mm(weight, h.T).T
    logits, argmax = head.greedy(h)
    assert list(argmax) == reference.argmax(-1).tolist()
    assert logits.argmax(-1).tolist() != reference.argmax(-1).tolist()  # the rescoring is what counts
    tolerance = {"bf16": 0.02, "fp16": 1e-3, "int8": 0.05}[route]
    torch.testing.assert_close(logits.float(), reference, rtol=tolerance, atol=tolerance * h.norm(dim=1).max().item())


@pytest.mark.parametrize("route", ROUTES)
@torch.inference_mode()
def test_rows_that_share_their_candidates_each_get_their_own_argmax(monkeypatch, route):
    """The rows of one verify share most of their candidates, which are rescored as one product over
    their union: rows close to each other, each with a different winner among the same near-tied
    tokens, must each get their own float32 argmax."""
    force(monkeypatch, route)
    generator = torch.Generator().manual_seed(5)
    vocab, hidden, rows = 4_096, 64, 12
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    base = 8 * weight[7] / weight[7].norm()  # token 7 wins by far
    lean = torch.randn(rows, hidden, generator=generator)
    lean -= (lean @ base)[:, None] * base / base.norm() ** 2  # directions the base row does not see
    twins = torch.arange(100, 100 + rows)
    weight[twins] = weight[7] + 1e-3 * lean  # tied with token 7 on the base row
    h = base + 0.05 * lean  # row i leans to twin i, by some 0.003 logits: inside every route's bound
    if head_route(weight) != route:
        pytest.skip(f"this torch or CPU has no {route} route")
    head = LMHead(weight, None, None, 1.0)
    reference = torch.mm(weight, h.T).T.argmax(-1).tolist()
    _, candidates = _near_the_top(head.cheap.product(h), head.cheap, h)
    assert len(set(reference)) == rows  # every row has its own winner ...
    assert len(torch.unique(candidates)) < len(candidates)  # ... among candidates the rows share
    assert list(head.greedy(h)[1]) == reference


@torch.inference_mode()
def test_the_fp16_bound_holds_for_the_kernel_itself(monkeypatch):
    """Each fp16 logit is within the route's proven bound of the exact (float64) product, on weights
    from the subnormal halves up to large ones and hidden rows with outlier channels (Gemma's final
    norm has |h_i| up to 172) -- what the bound needs of fbgemm's kernel (weights rounded to half,
    float32 products and sums), checked on this machine's kernel. The bound is also not loose
    by orders of magnitude (it would rescore whole rows)."""
    force(monkeypatch, "fp16")
    generator = torch.Generator().manual_seed(3)
    vocab, hidden = 4_096, 640
    magnitude = torch.logspace(-7, 1, vocab)[:, None]  # rows from the subnormal halves (< 6e-5) to 10
    weight = torch.randn(vocab, hidden, generator=generator) * magnitude
    h = torch.randn(9, hidden, generator=generator)
    h[:, [5, 50, 299]] *= 150  # outlier channels
    h[0] *= 1e-3
    cheap = cheap_head(weight)
    if cheap is None:
        pytest.skip("this torch or CPU has no fp16 route")
    raw = cheap.product(h)
    error = (raw.double() - torch.mm(weight.double(), h.double().T).T).abs()
    bound = cheap.bound(h, raw).double()
    assert bool((error <= bound).all()), (error / bound).max()
    assert float((error / bound).max()) > 1e-3


@torch.inference_mode()
def test_the_int8_bound_holds_for_the_kernel_itself_and_the_outlier_split_tightens_it():
    """Each int8 logit is within the route's per-token bound of the exact (float64) product, with
    and without the hidden row's outlier channels split out into float32 -- what the bound needs of
    fbgemm's kernel (int8 weights with a scale per row, 7-bit activations with one scale per call,
    int32 sums), checked on this machine's kernel, on rows from tiny to large weights. Splitting the
    outlier channels out is what makes the bound useful: many times tighter on such rows."""
    generator = torch.Generator().manual_seed(5)
    vocab, hidden = 4_096, 640
    weight = torch.randn(vocab, hidden, generator=generator) * torch.logspace(-6, 1, vocab)[:, None]
    h = torch.randn(7, hidden, generator=generator)
    h[:, [5, 50, 299]] *= 150  # outlier channels, as Gemma's final norm has
    h[0] *= 1e-3
    exact = torch.mm(weight.double(), h.double().T).T
    bounds = {}
    for outliers in ((), (5, 50, 299)):
        cheap = _int8_head(weight, outliers)
        if cheap is None:
            pytest.skip("this torch or CPU has no int8 route")
        raw = cheap.product(h)
        error, bound = (raw.double() - exact).abs(), cheap.bound(h, raw).double()
        assert bool((error <= bound).all()), (outliers, (error / bound).max())
        assert float((error / bound).max()) > 1e-2  # not loose by orders of magnitude
        bounds[outliers] = bound[1:].median()
    assert bounds[(5, 50, 299)] * 5 < bounds[()]


@torch.inference_mode()
def test_the_outlier_channels_are_the_largest_of_the_models_final_hidden_states():
    """``outlier_channels`` reads the model's own final hidden states: a channel the final norm
    scales up by far is among them."""
    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=512, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    model = Gemma3ForCausalLM(config).eval()
    model.model.norm.weight[[7, 40]] = 100.0
    channels = outlier_channels(model, 4)
    assert len(channels) == 4 and {7, 40} <= set(channels) and list(channels) == sorted(channels)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), hidden=st.sampled_from([8, 64, 640]), scale=st.floats(1e-3, 1e3),
       eps=st.floats(-1e-3, 1e-3), route=st.sampled_from(ROUTES))
def test_a_cheap_route_is_exact_on_random_heads_with_adversarial_near_ties(seed, hidden, scale, eps, route):
    """Property: on random heads, with each row's best token given twins that differ from it by a
    relative ``eps`` (down to 0: exact ties, which go to the lowest id as in ``argmax``), the route's
    argmax is the float32 one, and where the float32 product itself cannot order two logits (they
    differ by less than its own rounding, ``hidden`` float32 roundoffs of |w|·|h|: two float32 kernels
    may order them either way), one of those tied at that precision."""
    previous = {name: os.environ.get(f"SDLAB_{name.upper()}_HEAD") for name in ROUTES}
    try:
        for name in ROUTES:
            os.environ[f"SDLAB_{name.upper()}_HEAD"] = "1" if name == route else "0"
        generator = torch.Generator().manual_seed(seed)
        vocab = 3_000
        weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
        h = torch.randn(6, hidden, generator=generator) * scale
        with torch.inference_mode():
            for row in range(len(h)):
                best = int((weight @ h[row]).argmax())
                for j in range(3):
                    weight[(17 * row + 5 * j) % vocab] = weight[best] * (1 + eps * j)
            if cheap_head(weight) is None:
                return  # no such route on this machine
            _, argmax = LMHead(weight, None, None, 1.0).greedy(h)
            fp32 = torch.mm(weight, h.T).T.argmax(-1).tolist()
            exact = torch.mm(weight.double(), h.double().T).T
            rounding = hidden * 2.0**-24 * torch.mm(weight.double().abs(), h.double().abs().T).T
            for row, (got, want) in enumerate(zip(list(argmax), fp32)):
                if got != want:  # allowed only between logits float32 cannot tell apart
                    assert eps != 0 and exact[row, want] - exact[row, got] <= 2 * rounding[row, want], (row, got, want)
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(f"SDLAB_{name.upper()}_HEAD", None)
            else:
                os.environ[f"SDLAB_{name.upper()}_HEAD"] = value


def test_a_cheap_route_is_taken_only_where_it_pays(monkeypatch):
    small = LMHead(torch.zeros(100, 8), None, None, 1.0)
    for name in ROUTES:
        monkeypatch.setenv(f"SDLAB_{name.upper()}_HEAD", "auto")
    assert not small.certified_argmax and head_route(small.weight) == "float32"  # a small head is cheap in float32
    force(monkeypatch, "bf16")
    assert small.certified_argmax and not LMHead(torch.zeros(100, 8), None, None, -1.0).certified_argmax
    assert head_route(small.weight) == "bf16"
    force(monkeypatch, None)
    assert not LMHead(torch.zeros(100_000, 8), None, None, 1.0).certified_argmax


def test_a_route_is_picked_by_timing_it_against_float32():
    """``_fastest`` keeps the float32 head unless a candidate's product is faster on this machine."""
    weight = torch.randn(2_000, 16)
    no_slack = (lambda h: torch.zeros(len(h), 1)), torch.zeros(1, 2_000)
    slow = CheapHead("fp16", lambda h: time.sleep(0.002) or torch.mm(weight, h.T), *no_slack, 0.0)
    fast = CheapHead("bf16", lambda h: h, *no_slack, 0.0)
    assert _fastest(weight, [slow]) is None
    assert _fastest(weight, [slow, fast]) is fast
    assert _fastest(weight, []) is None


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("drafter,k", [("none", 4), ("draft", 4), ("eagle3", 5), ("hybrid", 4)])
def test_greedy_decoding_through_a_cheap_route_is_the_target_alone(tiny, monkeypatch, drafter, k, route):
    """The engine's verify with a route forced on (``SDLAB_<ROUTE>_HEAD=1``) gives token for token
    what ``model.generate(do_sample=False)`` gives."""
    target, _ = tiny
    force(monkeypatch, route)
    if head_route(target.model.get_output_embeddings().weight) != route:
        pytest.skip(f"this torch or CPU has no {route} route")
    prompt = "床前明月光，"
    decoder, ids = build_decoder(DecodeRequest.of(prompt, "tiny", drafter, k, max_new_tokens=24))
    out = [token.token for record in decoder.steps(ids) for token in record.emitted]
    with torch.inference_mode():
        reference = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24,
                                           pad_token_id=target.tokenizer.pad_token_id)[0, len(ids):].tolist()
    assert out == reference[: len(out)] and len(out) == len(reference)
