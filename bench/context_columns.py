"""What context columns buy an EAGLE-3 drafter with a reduced draft vocabulary, teacher-forced.

    python bench/context_columns.py [--preset gemma-270m] [--weights assets/gemma-270m/eagle3]
                                    [--prompts chat] [--max-new-tokens 64] [--threads 2]

The target's greedy continuation of every prompt (``model.generate``) is read once by the target
(its fused features) and once by the drafter, teacher-forced: at each continued position the
drafter's guess for the next token is ranked over three vocabularies -- its draft vocabulary alone
(what vLLM drafts from), that plus the ids of the request so far outside it (the lab's context
columns, ``core.drafters.vocab.ContextColumns``), and the target's whole vocabulary. Printed: the
share of positions whose target token is the drafter's first choice (depth-1 accuracy) and among
its first four (what a tree of width 4 can hold), and how many target tokens lie outside the draft
vocabulary and how many of those occurred earlier in the request.
"""
from __future__ import annotations

import argparse
import sys

import torch

from core.api import target_greedy
from core.drafters.base import DraftShape
from core.drafters.eagle import Eagle3Drafter
from core.models.loading import load_model, resolve_preset
from core.train.heldout import heldout_prompts

VOCABULARIES = ("draft vocabulary", "+ context columns", "whole vocabulary")


@torch.inference_mode()
def guesses(net, target, ids: list[int]) -> torch.Tensor:
    """The drafter's logits over the target's whole vocabulary [len(ids) - 1, V]: row t guesses token t+2
    from the target's feature at t and token t+1."""
    tokens = torch.tensor([ids])
    out = target.model(input_ids=tokens, output_hidden_states=True)
    features = net.fuse_target([out.hidden_states[i][0] for i in net.config.target_layers])
    n = len(ids) - 1
    mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
    state = net(features[None, :n], tokens[:, 1:], torch.arange(n)[None], mask)[0]
    return (state if net.norm is None else net.norm(state)).float() @ net.target_head.float().T


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="gemma-270m")
    parser.add_argument("--weights", default="assets/gemma-270m/eagle3", help="an eagle3 weights folder")
    parser.add_argument("--prompts", default="chat", help="heldout, chat, or a prompts file")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    target = load_model(resolve_preset(args.preset).target, "cpu")
    net = Eagle3Drafter(DraftShape(1, 1), target, args.weights, half_products=False).net
    if net.draft_vocab is None:
        parser.error(f"{args.weights} drafts over the whole vocabulary: there is nothing to widen")
    static = torch.zeros(net.vocab_size, dtype=torch.bool)
    static[net.draft_vocab] = True
    first, four = torch.zeros(3), torch.zeros(3)
    positions = outside = outside_in_context = 0
    for prompt in heldout_prompts(target, args.prompts):
        ids = prompt + target_greedy(target, prompt, args.max_new_tokens)
        logits = guesses(net, target, ids)
        context = net.context_columns()  # the engine's own: ``known`` is the draft vocabulary and the ids read
        for t in range(len(prompt) - 2, len(ids) - 2):  # row t guesses ids[t + 2], a continued token
            token, row = ids[t + 2], logits[t]
            context.read(ids[: t + 2])
            for v, allowed in enumerate((static, context.known, None)):
                ranked = row if allowed is None else row.masked_fill(~allowed, float("-inf"))
                top = ranked.topk(4).indices.tolist()
                first[v] += top[0] == token
                four[v] += token in top
            positions += 1
            if not static[token]:
                outside += 1
                outside_in_context += bool(context.known[token])
    print(f"{args.weights}, {args.prompts}: {positions} continued positions; {outside} target tokens "
          f"({outside / positions:.1%}) outside the {len(net.draft_vocab):,}-token draft vocabulary, "
          f"{outside_in_context} of them earlier in the request\n")
    print("| vocabulary | depth-1 accuracy | in the first 4 |\n|---|---|---|")
    for v, name in enumerate(VOCABULARIES):
        print(f"| {name} | {first[v] / positions:.3f} | {four[v] / positions:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
