"""The exact law of a target's first two sampled tokens, and the same two tokens counted over seeded
speculative runs: what the chi-square tests of tests/test_sampling.py (tiny) and tests/test_gemma.py
(Gemma at the demo's temperature) compare."""
from __future__ import annotations

import torch

from core import DecodeRequest, build_decoder

CHUNK = 16  # candidate first tokens per batched forward (Gemma's rows are 262,144 logits each)


@torch.inference_mode()
def exact_joint(loaded, prompt_ids, temperature, mass=0.995, max_first=256):
    """{(x1, x2): probability} for the first two tokens (x2 None after an end-of-sequence x1).

    First tokens are taken in order of probability until ``mass`` is covered (at most
    ``max_first``); the rest of the law falls into the pooled bin of the chi-square test.
    """
    model = loaded.model
    p1 = torch.softmax(model(torch.tensor([prompt_ids])).logits[0, -1].float() / temperature, dim=-1)
    order = torch.argsort(p1, descending=True)
    n_first = min(int((p1[order].cumsum(0) < mass).sum()) + 1, max_first)
    first = order[:n_first].tolist()
    joint = {}
    for at in range(0, len(first), CHUNK):  # batched forwards: the prompt followed by each candidate first token
        rows = first[at : at + CHUNK]
        logits = model(torch.tensor([prompt_ids + [x1] for x1 in rows]), logits_to_keep=1).logits[:, -1]
        p2 = torch.softmax(logits.float() / temperature, dim=-1)
        for row, x1 in enumerate(rows):
            if x1 in loaded.eos_ids:
                joint[(x1, None)] = p1[x1].item()
                continue
            pair = p1[x1] * p2[row]
            for x2 in torch.nonzero(pair > 1e-6).flatten().tolist():
                joint[(x1, x2)] = pair[x2].item()
    return joint


def binned(joint, counts, n):
    """Bins with expected count >= 5 each, the rest pooled; returns observed, expected."""
    big = [k for k, p in joint.items() if p * n >= 5]
    observed = [counts.get(k, 0) for k in big]
    expected = [joint[k] * n for k in big]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    return observed, expected


def sample_pairs(prompt, preset, drafter, temperature, n, **shape):
    """{(x1, x2): count} over seeds 0..n-1, and the draft tokens verified over all of them."""
    counts, proposed = {}, 0
    for seed in range(n):
        decoder, ids = build_decoder(DecodeRequest.of(
            prompt, preset, drafter, temperature=temperature, seed=seed, max_new_tokens=3, **shape
        ))
        for _ in decoder.steps(ids):
            pass
        tokens = decoder.result.tokens
        key = (tokens[0], tokens[1] if len(tokens) > 1 else None)
        counts[key] = counts.get(key, 0) + 1
        proposed += decoder.result.draft_tokens_proposed
    return counts, proposed
