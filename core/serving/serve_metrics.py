"""``python -m core serve-metrics``: decode prompts one after another and serve the runs' counters
at ``http://HOST:PORT/metrics`` in vLLM's names (``core.serving.prometheus``), for a Prometheus, a
Grafana board made for vLLM, or the app's Production monitor.

    python -m core serve-metrics --preset tiny --drafter eagle3 --k 4 --port 9400 [--rounds 0]

Loopback only unless ``--host`` names another address and ``--allow-remote`` is given.
"""
from __future__ import annotations

import sys
import time

from core.drafters.eagle import Eagle3Drafter
from core.errors import UserError


def add_arguments(parser) -> None:
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--drafter", default=Eagle3Drafter.name, help=f"drafter of every run (default {Eagle3Drafter.name})")
    parser.add_argument("--k", type=int, default=4, help="draft chain length / tree depth (default 4)")
    parser.add_argument("--tree", help="WIDTHxDEPTH tree instead of a chain")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompts", help="prompts file, one per line (default: assets/prompts/heldout.txt)")
    parser.add_argument("--rounds", type=int, default=0, help="passes over the prompts, then keep serving; "
                                                               "0 = decode forever (default)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between runs (default 0)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9400, help="port (default 9400)")
    parser.add_argument("--allow-remote", action="store_true", help="needed to listen on a non-loopback --host")


def run(args) -> int:
    from prometheus_client import start_http_server

    from core.api import build_decoder
    from core.models.prompts import HELDOUT_PROMPTS, load_prompts
    from core.request import DecodeRequest
    from core.serving.prometheus import lab_metrics

    if not args.allow_remote and not _loopback(args.host):
        raise UserError(f"--host {args.host} is not a loopback address: add --allow-remote to serve /metrics there")
    prompts = load_prompts(args.prompts or HELDOUT_PROMPTS)
    lab = lab_metrics()
    server, thread = start_http_server(args.port, addr=args.host, registry=lab.registry)
    print(f"serving http://{args.host}:{args.port}/metrics (Ctrl-C to stop)", file=sys.stderr)
    try:
        rounds = 0
        while args.rounds == 0 or rounds < args.rounds:
            with lab.queue(args.preset, len(prompts)) as queue:
                for prompt in prompts:
                    queue.take()
                    decoder, prompt_ids = build_decoder(DecodeRequest.of(
                        prompt, args.preset, args.drafter, args.k, args.tree, max_new_tokens=args.max_new_tokens))
                    with lab.request(args.preset) as meter:
                        for record in decoder.steps(prompt_ids):
                            meter.observe(record)
                    time.sleep(args.pause)
            rounds += 1
        print(f"{rounds} round(s) done; still serving /metrics", file=sys.stderr)
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


def _loopback(host: str) -> bool:
    from core.serving.monitor import is_loopback_address

    try:
        return host == "localhost" or is_loopback_address(host)
    except ValueError:  # a host name
        return False
