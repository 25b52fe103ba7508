"""``python -m core vllm setup|status|compare|serve`` (docs/vllm.md).

* ``setup``: build the pinned vLLM venv under ``~/.cache`` (about 6 minutes; pip's progress shown);
* ``status``: where it is and what it holds, or the command that builds it;
* ``compare``: the same greedy requests through vLLM and through the lab on vLLM's schedule, text and
  spec-decode counters side by side, per prompt;
* ``serve``: ``vllm serve`` on loopback with the preset's target and a speculative method, until Ctrl-C
  (its OpenAI API, and its ``/metrics`` for the app's Production monitor).
"""
from __future__ import annotations

import json
import sys

from core.common.errors import UserError
from core.models.loading import resolve_preset
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.vllm import env
from core.vllm.client import VllmError, VllmRunner
from core.vllm.oracle import METHODS, compare, markdown, method
from core.vllm.serve import serve


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="vllm_command", required=True)
    sub.add_parser("setup", help="build the pinned vLLM virtual environment under ~/.cache (about 6 minutes)")
    sub.add_parser("status", help="where the vLLM environment is and what it holds")
    c = sub.add_parser("compare", help="the same greedy requests through vLLM and the lab: text and counters")
    c.add_argument("--preset", default="tiny")
    c.add_argument("--method", default="eagle3", choices=METHODS)
    c.add_argument("--k", type=int, default=3, help="draft tokens per step (num_speculative_tokens)")
    c.add_argument("--prompts", help="prompts file, one per line (default: the held-out set)")
    c.add_argument("--limit", type=int, help="only the first N prompts")
    c.add_argument("--max-new-tokens", type=int, default=40)
    c.add_argument("--threads", type=int, default=2, help="vLLM's CPU threads (bound to cores 0..N-1)")
    c.add_argument("--log", help="append vLLM's own log to this file")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    s = sub.add_parser("serve", help="vllm serve on 127.0.0.1 with the preset's target and a speculative method")
    s.add_argument("--preset", default="tiny")
    s.add_argument("--method", default="eagle3", choices=METHODS)
    s.add_argument("--k", type=int, default=3, help="draft tokens per step (num_speculative_tokens)")
    s.add_argument("--port", type=int, help="default: a free port")
    s.add_argument("--threads", type=int, default=2, help="vLLM's CPU threads (bound to cores 0..N-1)")
    s.add_argument("--log", default=str(env.venv_dir().parent / "serve.log"), help="vLLM's own log (overwritten)")


def run(args) -> int:
    if args.vllm_command == "setup":
        env.setup(lambda line: print(line, file=sys.stderr, flush=True))
        return 0
    if args.vllm_command == "status":
        found = env.stamp()
        print(json.dumps({"venv": str(env.venv_dir()), "ready": env.ready(), "installed": found,
                          "package_for_this_machine": env.package()}) if found
              else env.missing_reason())
        return 0 if env.ready() else 1
    if args.vllm_command == "serve":
        return run_serve(args)
    prompts = load_prompts(args.prompts or HELDOUT_PROMPTS)[: args.limit]
    spec = method(args.method, args.preset, args.k)
    with VllmRunner(resolve_preset(args.preset).target, spec.speculative_config(), threads=args.threads,
                    log_file=args.log) as runner:
        rows = compare(runner, spec, args.preset, prompts, args.max_new_tokens)
    if args.json:
        print(json.dumps({"method": spec.label, "rows": [r.model_dump() for r in rows]}, ensure_ascii=False))
    else:
        print(markdown(spec, rows))
    same = all(r.identical and r.same_counts for r in rows)
    print(f"{sum(r.identical for r in rows)}/{len(rows)} identical text, "
          f"{sum(r.same_counts for r in rows)}/{len(rows)} equal counters", file=sys.stderr)
    return 0 if same else 1


def run_serve(args) -> int:
    """Until Ctrl-C (exit 0) or the server's own end (exit 1); a server that fails to start prints the
    last lines of its log."""
    if not env.ready():
        raise UserError(env.missing_reason())
    spec = method(args.method, args.preset, args.k)
    target = resolve_preset(args.preset).target
    print(f"vLLM: loading {target} with {spec.label} (a minute or two for tiny on 2 cores; its log: {args.log})",
          file=sys.stderr, flush=True)
    try:
        with serve(target, spec.speculative_config(), threads=args.threads, port=args.port,
                   log_file=args.log) as server:
            print(f"vLLM serves {server.model} ({spec.label}) at {server.url}: OpenAI API {server.url}/v1/completions,"
                  f" metrics {server.metrics_url} (the app's Production monitor reads it). Ctrl-C stops it.",
                  flush=True)
            status = server.process.wait()
    except VllmError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("vLLM stopped", file=sys.stderr)
        return 0
    print(f"error: vllm serve exited (status {status}); its log: {args.log}", file=sys.stderr)
    return 1
