"""``python -m core generate``: one prompt, decoded speculatively; flags read off ``DecodeRequest``."""
from __future__ import annotations

import argparse
import json
import sys
import typing

from core.api import generate
from core.drafters import option_fields, option_owners
from core.common.errors import counted
from core.api.request import DecodeRequest, drafter_names, flag


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``generate``, read off ``DecodeRequest`` and every drafter's ``Options``."""
    fields = DecodeRequest.model_fields
    p.add_argument("--prompt", required=True)
    for name in ("preset", "target", "draft"):
        add_field_argument(p, name, fields[name])
    p.add_argument("--drafter", default=fields["drafter"].default,
                   help=f"{', '.join(drafter_names())} (default: {fields['drafter'].default})")
    p.add_argument("--k", default=4, help="draft chain length / tree depth (default: 4)")
    p.add_argument("--tree", help="draft a tree WIDTHxDEPTH instead of a chain, e.g. 2x3 (eagle/eagle3: "
                                  "WIDTH is EAGLE-2's top-k)")
    for name, info in option_fields().items():
        add_field_argument(p, name, info, default=None, owners=option_owners(name))
    for name in ("max_new_tokens", "temperature", "seed", "block_size", "device", "target_precision",
                 "trust_remote_code"):
        add_field_argument(p, name, fields[name])
    p.add_argument("--trace", help="write the step records as JSON lines to this file (docs/trace.md)")
    p.add_argument("--check", action="store_true", help="also run the target alone and report baseline_match")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_field_argument(p: argparse.ArgumentParser, name: str, info, default=..., owners=()) -> None:
    """One ``--flag`` from a pydantic field: its type, choices, default and description."""
    annotation = info.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kind = args[0]
    default = info.default if default is ... else default
    help_text = (info.description or "") + (f" [{'/'.join(owners)}]" if owners else "")
    if kind is bool:  # a drafter's option stays None (unset) unless given: other drafters refuse it
        p.add_argument(f"--{flag(name)}", action="store_true", default=default, help=help_text)
        return
    kwargs = {"choices": list(typing.get_args(kind))} if typing.get_origin(kind) is typing.Literal else \
        {"type": kind if kind in (int, float) else str}
    shown = "" if default is None else f" (default: {default})"
    p.add_argument(f"--{flag(name)}", default=default, help=help_text + shown, **kwargs)


def run_generate(args: argparse.Namespace) -> int:
    flat = {name: getattr(args, name) for name in (
        "max_new_tokens", "temperature", "seed", "block_size", "device", "target_precision", "trust_remote_code",
        "target", "draft",
        *option_fields())}
    result = generate(args.prompt, args.preset, args.drafter, k=args.k, tree=args.tree, check=args.check,
                      trace=args.trace, **flat)
    data = result.to_dict()
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        print(args.prompt + result.text)
        print(
            f"\n[{args.drafter}] {counted(data['new_tokens'], 'new token')} in "
            f"{counted(data['target_forwards'], 'target forward')} "
            f"(tau {data['mean_accepted_tokens']:.2f}), acceptance {data['acceptance_rate']:.1%}, "
            f"{data['tokens_per_s']:.1f} tokens/s, KV peak {data['kv']['peak_blocks_in_use']} blocks",
            file=sys.stderr,
        )
        if args.check:
            print(f"identical to the target alone: {data['baseline_match']}", file=sys.stderr)
    if result.trace_error:
        print(f"error: {result.trace_error}", file=sys.stderr)
        return 1
    return 0
