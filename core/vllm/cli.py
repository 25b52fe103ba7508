"""``python -m core vllm setup|status|compare|serve`` (docs/vllm.md).

* ``setup``: build the pinned vLLM venv under ``~/.cache`` (about 6 minutes; pip's progress shown);
* ``status``: where it is and what it holds, or the command that builds it;
* ``compare``: the same greedy requests through vLLM and through the lab on vLLM's schedule, text and
  spec-decode counters side by side, per prompt;
* ``serve``: ``vllm serve`` on loopback with the preset's target and a speculative method, until Ctrl-C
  (its OpenAI API, and its ``/metrics`` for the app's Production monitor).
"""
from __future__ import annotations

import argparse
import json
import sys

from core.api.request import flag
from core.common.errors import UserError, exit_status
from core.common.files import check_output_file
from core.models.loading import resolve_preset
from core.models.prompts import HELDOUT_PROMPTS
from core.vllm import env
from core.vllm.client import VllmError, VllmRunner
from core.vllm.oracle import compare, markdown, method
from core.vllm.serve import serve
from core.vllm.settings import CompareSettings, ServeSettings, VllmSettings


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="vllm_command", required=True)
    sub.add_parser("setup", help="build the pinned vLLM virtual environment under ~/.cache (about 6 minutes)")
    sub.add_parser("status", help="where the vLLM environment is and what it holds")
    c = sub.add_parser("compare", help="the same greedy requests through vLLM and the lab: text and counters")
    add_settings_arguments(c, CompareSettings, "max_new_tokens")
    c.add_argument("--prompts", help="prompts file, one per line (default: the held-out set)")
    c.add_argument("--limit", type=int, help="only the first N prompts (1 to the number of prompts; default: all)")
    c.add_argument("--log", help="append vLLM's own log to this file")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    s = sub.add_parser("serve", help="vllm serve on 127.0.0.1 with the preset's target and a speculative method")
    add_settings_arguments(s, ServeSettings, "port")
    s.add_argument("--log", default=str(env.venv_dir().parent / "serve.log"), help="vLLM's own log (overwritten)")


def add_settings_arguments(p: argparse.ArgumentParser, settings: type[VllmSettings], *more: str) -> None:
    """The flags of the shared settings and ``more`` of ``settings``' own fields: defaults and help read off
    the fields; values are checked by ``settings`` (``core.vllm.settings``)."""
    for name in ("preset", "method", "k", "threads", *more):
        info = settings.model_fields[name]
        shown = "" if info.default is None else f" (default: {info.default})"
        p.add_argument(f"--{flag(name)}", type=str if name in ("preset", "method") else int, default=info.default,
                       help=(info.description or "") + shown)


def run(args) -> int:
    """A failure of vLLM (``VllmError``) or of setup's pip (``VenvError``) reaches ``core.cli``'s error
    boundary, which prints its first line."""
    commands = {"setup": run_setup, "status": run_status, "compare": run_compare, "serve": run_serve}
    return commands[args.vllm_command](args)


def run_setup(args) -> int:
    env.setup(lambda line: print(line, file=sys.stderr, flush=True))
    return 0


def run_status(args) -> int:
    found = env.stamp()
    if found is None:
        print(env.missing_reason())
    else:
        print(json.dumps({"venv": str(env.venv_dir()), "ready": env.ready(), "installed": found.model_dump(),
                          "package_for_this_machine": env.package(), "plugin_of_this_checkout": env.PLUGIN_VERSION,
                          **({} if env.ready() else {"fix": env.missing_reason()})}))
    return 0 if env.ready() else 1


def run_compare(args) -> int:
    """Every setting checked before anything is exported or loaded; exit 0 only when every prompt agrees."""
    settings = CompareSettings.of(args.prompts or HELDOUT_PROMPTS, args.limit, preset=args.preset, method=args.method,
                                  k=args.k, threads=args.threads, max_new_tokens=args.max_new_tokens)
    if args.log:
        check_output_file(args.log, "--log")
    if not env.ready():
        raise UserError(env.missing_reason())
    spec = method(settings.method, settings.preset, settings.k)
    with VllmRunner(resolve_preset(settings.preset).target, spec.speculative_config(), threads=settings.threads,
                    log_file=args.log) as runner:
        rows = compare(runner, spec, settings.preset, settings.prompts, settings.max_new_tokens)
    if args.json:
        print(json.dumps({"method": spec.label, "rows": [r.model_dump() for r in rows]}, ensure_ascii=False))
    else:
        print(markdown(spec, rows))
    same = all(r.identical and r.same_counts for r in rows)
    print(f"{sum(r.identical for r in rows)}/{len(rows)} identical text, "
          f"{sum(r.same_counts for r in rows)}/{len(rows)} equal counters", file=sys.stderr)
    return 0 if same else 1


def run_serve(args) -> int:
    """Until Ctrl-C (exit 0) or the server's own end (a ``VllmError``: exit 1); a server that fails to
    start is a ``VllmError`` naming its log."""
    settings = ServeSettings.checked(preset=args.preset, method=args.method, k=args.k, threads=args.threads,
                                     port=args.port)
    if not env.ready():
        raise UserError(env.missing_reason())
    check_output_file(args.log, "--log")  # by default beside the venv
    spec = method(settings.method, settings.preset, settings.k)
    target = resolve_preset(settings.preset).target
    print(f"vLLM: loading {target} with {spec.label} (minutes on 2 cores: tiny 1 to 2, gemma-270m 2 to 5; "
          f"its log: {args.log})",
          file=sys.stderr, flush=True)
    try:
        with serve(target, spec.speculative_config(), threads=settings.threads, port=settings.port,
                   log_file=args.log) as server:
            print(f"vLLM serves {server.model} ({spec.label}) at {server.url}: OpenAI API {server.url}/v1/completions,"
                  f" metrics {server.metrics_url} (the app's Production monitor reads it). Ctrl-C stops it.",
                  flush=True)
            status = server.process.wait()
    except KeyboardInterrupt:
        print("vLLM stopped", file=sys.stderr)
        return 0
    raise VllmError(f"vllm serve exited with {exit_status(status)} (its log: {args.log})")
