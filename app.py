"""Start the Speculative Decoding Lab in the browser.

    python app.py [--preset tiny|gemma-270m|PATH] [--host 127.0.0.1] [--port 7860] [--lang zh|en]
                  [--allow-own-models | --no-own-models] [--trust-remote-code]
                  [--allow-remote-metrics] [--allow-remote-monitor]
                  [--max-runs 4] [--queue-size 32] [--run-budget 32768]

The default preset is ``gemma-270m`` when its packages are installed (README, set-up), else
``tiny``. No model is loaded here: the first run in the page loads it (and caches it for every
session); ``gemma-270m`` is converted here once, on its first start, with progress on stderr.

The page's "your own models" fields (a target / draft by folder or hub id) are on when the server
listens on a loopback address only; on any other address a visitor could make the server load any
folder or download any model, so they need ``--allow-own-models``. Model code shipped with a model
never runs unless ``--trust-remote-code`` is given.

``/metrics`` (the runs' counters in vLLM's names, docs/production.md) answers clients on this
machine only, unless ``--allow-remote-metrics``; the Production monitor polls only endpoints on
this machine (host names resolved first), unless ``--allow-remote-monitor``.
Limits (``app.page_limits``, docs/app.md): ``--max-runs`` decoding requests at once over all visitors
(one long run per page), ``--run-budget`` new tokens x (draft tree nodes + 1) per request,
``--queue-size`` requests waiting in the queue. Past a limit a visitor gets a message at once.
"""
from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description="Speculative Decoding Lab: the Gradio teaching app")
    parser.add_argument("--preset", help="tiny, gemma-270m, or a local model folder (default: gemma-270m when "
                                          "installed, else tiny)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=7860, help="port (default: 7860)")
    parser.add_argument("--lang", choices=["zh", "en"], default="zh", help="first language of the page (default: zh)")
    own = parser.add_mutually_exclusive_group()
    own.add_argument("--allow-own-models", action="store_true",
                     help="let visitors name their own target/draft (folder or hub id) on a non-loopback --host")
    own.add_argument("--no-own-models", action="store_true", help="presets only, even on 127.0.0.1")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow model code shipped with a model (transformers' trust_remote_code); read it first")
    parser.add_argument("--allow-remote-metrics", action="store_true",
                        help="serve /metrics to any client, not only this machine's")
    parser.add_argument("--allow-remote-monitor", action="store_true",
                        help="let the Production monitor poll endpoints on other machines (request forgery risk "
                             "on a public server)")
    from app.page_limits import ServerLimits

    defaults = ServerLimits()
    parser.add_argument("--max-runs", type=int, default=defaults.max_runs,
                        help=f"decoding requests at once, all visitors together (default: {defaults.max_runs})")
    parser.add_argument("--queue-size", type=int, default=defaults.queue_size,
                        help=f"requests that may wait in the queue (default: {defaults.queue_size})")
    parser.add_argument("--run-budget", type=int, default=defaults.run_budget,
                        help="new tokens x (draft tree nodes + 1) one request may ask for, summed over a "
                             f"comparison's runs (default: {defaults.run_budget})")
    parser.add_argument("--max-sessions", type=int, default=defaults.max_sessions,
                        help=f"browser or API sessions alive at once; a new one beyond is refused with a message "
                             f"(default: {defaults.max_sessions})")
    parser.add_argument("--session-ttl", type=int, default=defaults.session_ttl_s,
                        help="seconds without an action of its visitor after which a session is closed: its runs "
                             f"stopped, its memory returned (default: {defaults.session_ttl_s})")
    args = parser.parse_args()

    from app.controls import ModelPolicy, MonitorPolicy
    from app.metrics_route import metrics_route
    from app.ui import build_app, launch
    from core import UserError
    from core.models.loading import default_preset, resolve_preset

    args.preset = args.preset or default_preset()
    try:
        resolve_preset(args.preset)  # a typo fails here, before the server starts; nothing is loaded yet
    except UserError as e:
        parser.error(str(e))

    policy = ModelPolicy.for_server(args.host, allow_own_models=args.allow_own_models,
                                    no_own_models=args.no_own_models, trust_remote_code=args.trust_remote_code)
    monitor_policy = MonitorPolicy.for_server(args.host, args.port, allow_remote=args.allow_remote_monitor)
    try:
        limits = ServerLimits(args.max_runs, args.queue_size, args.run_budget, args.max_sessions, args.session_ttl)
    except ValueError as e:
        parser.error(str(e))
    launch(build_app(args.preset, args.lang, policy, monitor_policy, limits), args.host, args.port, limits,
           routes=[metrics_route(allow_remote=args.allow_remote_metrics)])


if __name__ == "__main__":
    main()
