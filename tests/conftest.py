"""Shared fixtures: the shipped tiny family, and small random models built in the test; the
hypothesis profiles: ``ci`` (the default, a few hundred examples per property) and ``slow``
(thousands; ``SDLAB_SLOW=1``, the opt-in tier, like ``SDLAB_GEMMA=1``)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from app_server import running_app
from prompts import LOSSLESS_PROMPTS
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "assets" / "tiny"
SLOW = os.environ.get("SDLAB_SLOW") == "1"

try:
    from hypothesis import HealthCheck, settings

    _quiet = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("ci", max_examples=200, **_quiet)
    settings.register_profile("slow", max_examples=3000, **_quiet)
    settings.load_profile("slow" if SLOW else "ci")
except ImportError:  # hypothesis is a test requirement; the property tests skip without it
    pass


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test of the opt-in tier (SDLAB_SLOW=1); CI runs a representative sibling")


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.slow`` tests run only with ``SDLAB_SLOW=1``: each repeats, on more cases, a check
    that a faster sibling in the default suite already makes (CI stays under 15 minutes on 2 cores)."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow tier: run it with SDLAB_SLOW=1 (a faster sibling runs by default)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_controller_memory(monkeypatch):
    """Every test starts with an empty goodput-controller memory: what earlier tests' runs taught it
    (kept per process, as a server keeps it) must not decide what this test's runs draft."""
    import core.drafters.controller

    monkeypatch.setattr(core.drafters.controller, "_MEMORY", {})


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Every test runs torch on one thread: the tiny family's small forwards run fastest on one, and on a
    busy machine two threads spin-wait for each other (χ² sampling runs: 5 s on one thread against 18 s
    on two, load 12). A test that measures threads sets them itself and restores them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def random_llama():
    """A 2-layer random Llama (vocab 97) for mask and cache mechanics; no tokenizer needed."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def tiny():
    """The shipped tiny target and draft, loaded through the same path as every HF model."""
    from core.models.loading import PRESETS, load_model

    return load_model(PRESETS["tiny"].target, "cpu"), load_model(PRESETS["tiny"].draft, "cpu")


@pytest.fixture(scope="module")
def baseline_target(tiny):
    """The model ``baselines`` decodes: the tiny target (a module on another model overrides this fixture)."""
    return tiny[0]


@pytest.fixture(scope="module")
def baseline_prompts():
    """The prompts ``baselines`` covers: the engine's lossless set (a module may override this fixture)."""
    return LOSSLESS_PROMPTS


@pytest.fixture(scope="module")
def baselines(request, baseline_target, baseline_prompts):
    """What a lossless run must give, per prompt: (its ids, the target's own greedy continuation of the
    requesting module's ``MAX_NEW`` tokens), from ``target_greedy``, i.e. model.generate(do_sample=False)."""
    from core import target_greedy

    max_new = request.module.MAX_NEW
    out = {}
    for prompt in baseline_prompts:
        ids = baseline_target.tokenizer(prompt).input_ids
        out[prompt] = (ids, target_greedy(baseline_target, ids, max_new))
    return out


@pytest.fixture(scope="module")
def url():
    """The address of ``python app.py --preset tiny``, started once per module (a module that needs other
    flags overrides this fixture)."""
    with running_app("tiny") as address:
        yield address
