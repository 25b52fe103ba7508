"""The packed Linear path of a float32 body (``core.runtime.kernels``): the same logits as ``F.linear`` to
float32 rounding, taken only from ``PACK_FROM_ROWS`` rows on, and greedy decoding through it is
still the target alone."""
import copy

import pytest
import torch

from core import DecodeRequest, build_decoder
from core.runtime import kernels
from core.runtime.kernels import PACK_FROM_ROWS, first_packed_row, pack_linears



def _linears(model):
    return [m for m in model.get_decoder().modules() if isinstance(m, torch.nn.Linear)]


def _unpack(model) -> None:
    for module in _linears(model):
        module.__dict__.pop("forward", None)
        module.__dict__.pop("packed_weight", None)


@torch.inference_mode()
def test_packed_linears_give_the_plain_logits(random_llama, monkeypatch):
    monkeypatch.setenv("SDLAB_PACKED_LINEAR", "1")
    packed = copy.deepcopy(random_llama)
    assert pack_linears(packed) == len(_linears(packed)) == 2 * 7  # q k v o gate up down per layer
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[0].shape) or real(*a))
    for rows in (1, PACK_FROM_ROWS - 1, PACK_FROM_ROWS, 17):
        ids = torch.arange(3, 3 + rows)[None]
        expected = random_llama(ids).logits
        calls.clear()
        torch.testing.assert_close(packed(ids).logits, expected, atol=1e-5, rtol=1e-5)
        assert len(calls) == (14 if rows >= PACK_FROM_ROWS else 0)


def test_small_models_and_the_switch_leave_the_body_alone(random_llama, monkeypatch):
    model = copy.deepcopy(random_llama)
    monkeypatch.setenv("SDLAB_PACKED_LINEAR", "auto")
    assert pack_linears(model) == 0  # 2 small layers: a second copy would not pay
    monkeypatch.setenv("SDLAB_PACKED_LINEAR", "0")
    assert pack_linears(model) == 0 and not hasattr(_linears(model)[0], "packed_weight")


@pytest.mark.parametrize("drafter,k", [("draft", 4), ("eagle3", 5)])
def test_greedy_decoding_through_packed_linears_is_the_target_alone(tiny, monkeypatch, drafter, k):
    target, _ = tiny
    monkeypatch.setenv("SDLAB_PACKED_LINEAR", "1")
    assert pack_linears(target.model) > 0
    try:
        decoder, ids = build_decoder(DecodeRequest.of("床前明月光，疑是地上霜。", "tiny", drafter, k, max_new_tokens=24))
        out = [token.token for record in decoder.steps(ids) for token in record.emitted]
        with torch.inference_mode():
            reference = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24,
                                               pad_token_id=target.tokenizer.pad_token_id)[0, len(ids):].tolist()
        assert out == reference
    finally:
        _unpack(target.model)


@pytest.mark.parametrize("times, first", [
    ({1: (34.2, 29.8), 2: (61.3, 33.7), 3: (71.2, 34.9)}, 1),  # AMD EPYC, AVX2 only (kernels' docstring)
    ({1: (15.5, 20.3), 2: (17.0, 21.0), 3: (18.5, 21.8)}, PACK_FROM_ROWS),  # Xeon with AMX
    ({1: (15.0, 20.0), 2: (30.0, 21.0), 3: (31.0, 22.0)}, 2),
    ({1: (30.0, 20.0), 2: (21.0, 22.0), 3: (31.0, 22.0)}, 3),  # faster from 3 on only: not at 1
])
def test_the_packed_copy_is_taken_from_the_row_count_where_it_is_faster_from_then_on(times, first):
    assert first_packed_row(times) == first


def test_a_packed_body_times_its_row_count_on_this_cpu(random_llama, monkeypatch):
    monkeypatch.setenv("SDLAB_PACKED_LINEAR", "auto")
    monkeypatch.setattr(kernels, "MIN_PACKED_PARAMS", 0)
    model = copy.deepcopy(random_llama)
    measured = []
    monkeypatch.setattr(kernels, "first_packed_row", lambda times: measured.append(times) or 2)
    assert pack_linears(model) == len(_linears(model))
    assert sorted(measured[0]) == list(range(1, PACK_FROM_ROWS))  # both ways at every count below the default
    assert {m.pack_from_rows for m in _linears(model)} == {2}
    calls = []
    real = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a[0].shape) or real(*a))
    with torch.inference_mode():
        model(torch.arange(3, 4)[None])
        assert not calls
        expected = random_llama(torch.arange(3, 5)[None]).logits
        torch.testing.assert_close(model(torch.arange(3, 5)[None]).logits, expected, atol=1e-5, rtol=1e-5)
    assert len(calls) == len(_linears(model))


# ---- drafters' half-precision products -------------------------------------------------------------
def _fbgemm_or_skip():
    if kernels.half_product(torch.ones(2, 2)) is None:
        pytest.skip("no fbgemm fp16 GEMM in this torch build or on this CPU")


def test_a_half_product_is_the_half_rounded_weight_summed_in_float32():
    _fbgemm_or_skip()
    torch.manual_seed(0)
    weight, x = torch.randn(300, 64), torch.randn(3, 5, 64)
    product = kernels.half_product(weight)
    out = product(x)
    assert out.shape == (3, 5, 300)
    torch.testing.assert_close(out, x @ weight.half().float().T, rtol=0, atol=1e-4)
    assert (out - x @ weight.T).abs().max() > 1e-4  # not the float32 product: the weight was rounded


def test_half_linears_round_only_without_gradients(monkeypatch):
    _fbgemm_or_skip()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.SiLU(), torch.nn.Linear(32, 8, bias=False))
    exact = copy.deepcopy(net)
    assert kernels.half_linears(net) == 2
    x = torch.randn(4, 64)
    with torch.no_grad():
        first = net[0](x)
        torch.testing.assert_close(first, torch.nn.functional.linear(x, net[0].weight.half().float(), net[0].bias),
                                   rtol=0, atol=1e-4)
        assert not torch.equal(first, exact[0](x))
    net(x).sum().backward()  # training: the float32 weights, with their gradients
    assert torch.equal(net(x), exact(x)) and net[0].weight.grad is not None
    monkeypatch.setenv("SDLAB_HALF_DRAFTERS", "0")
    assert kernels.half_product(torch.ones(2, 2)) is None and kernels.half_linears(copy.deepcopy(exact)) == 0


def test_an_eagle3_drafter_drafts_through_half_products_and_stays_lossless(tiny):
    _fbgemm_or_skip()
    target, _ = tiny
    decoder, ids = build_decoder(DecodeRequest.of("我爱中国，", "tiny", "eagle3", k=5, max_new_tokens=24))
    net = decoder.drafter.net
    assert net.head_product is not None
    assert all(hasattr(m, "half_product") for m in net.modules() if isinstance(m, torch.nn.Linear))
    out = [token.token for record in decoder.steps(ids) for token in record.emitted]
    with torch.inference_mode():
        reference = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24,
                                           pad_token_id=target.tokenizer.pad_token_id)[0, len(ids):].tolist()
    assert out == reference
    exact, _ = build_decoder(DecodeRequest.of("我爱中国，", "tiny", "eagle3", k=5, draft_precision="float32"))
    assert exact.drafter.net.head_product is None  # what the vLLM oracle asks for: vLLM-CPU drafts in float32
