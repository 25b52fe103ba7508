"""``python -m core serve-metrics``: decode prompts one after another and serve the runs' counters
at ``http://HOST:PORT/metrics`` in vLLM's names (``core.serving.prometheus``), for a Prometheus, a
Grafana board made for vLLM, or the app's Production monitor.

    python -m core serve-metrics --preset tiny --drafter eagle3 --k 4 --port 9400 [--rounds 0]

Loopback only unless ``--host`` names another address and ``--allow-remote`` is given.
"""
from __future__ import annotations

import math
import sys
import time

from prometheus_client import start_http_server

from core.api import build_decoder
from core.drafters.eagle import Eagle3Drafter
from core.common.errors import UserError
from core.models.prompts import HELDOUT_PROMPTS, load_prompts
from core.api.request import DecodeRequest
from core.serving.monitor import is_loopback_host
from core.serving.prometheus import lab_metrics


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


MAX_PAUSE_S = 3600.0
MAX_ROUNDS = 1_000_000


def check_arguments(args) -> None:
    """Every flag, before a model is loaded or a port is bound."""
    if not 1 <= args.port <= 65535:
        raise UserError(f"--port must be between 1 and 65535 (got {args.port})")
    if not (math.isfinite(args.pause) and 0 <= args.pause <= MAX_PAUSE_S):
        raise UserError(f"--pause must be between 0 and {MAX_PAUSE_S:.0f} seconds (got {args.pause})")
    if not 0 <= args.rounds <= MAX_ROUNDS:
        raise UserError(f"--rounds must be between 0 (forever) and {MAX_ROUNDS} (got {args.rounds})")
    if not args.allow_remote and not is_loopback_host(args.host):
        raise UserError(f"--host {args.host} is not a loopback address: add --allow-remote to serve /metrics there")


def url(host: str, port: int) -> str:
    """``http://HOST:PORT/metrics``, an IPv6 address in brackets (``http://[::1]:9400/metrics``)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


def run(args) -> int:
    check_arguments(args)
    prompts = load_prompts(args.prompts or HELDOUT_PROMPTS)
    requests = [DecodeRequest.of(prompt, args.preset, args.drafter, args.k, args.tree,
                                 max_new_tokens=args.max_new_tokens) for prompt in prompts]  # checked before serving
    lab = lab_metrics()
    try:
        server, thread = start_http_server(args.port, addr=args.host, registry=lab.registry)
    except OSError as e:
        raise UserError(f"cannot listen on {args.host} port {args.port}: {e.strerror or e}") from None
    print(f"serving {url(args.host, args.port)} (Ctrl-C to stop)", file=sys.stderr)
    try:
        rounds = 0
        while args.rounds == 0 or rounds < args.rounds:
            with lab.queue(args.preset, len(prompts)) as queue:
                for request in requests:
                    queue.take()
                    decoder, prompt_ids = build_decoder(request)
                    with lab.request(args.preset) as meter:
                        for record in decoder.steps(prompt_ids):
                            meter.observe(record)
                    time.sleep(args.pause)
            rounds += 1
        print(f"{rounds} round(s) done; still serving {url(args.host, args.port)}", file=sys.stderr)
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0
