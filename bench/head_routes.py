"""The greedy verify through each LM-head route, interleaved in one process, against one plain forward.

    python bench/head_routes.py [PRESET] [THREADS] [REPEATS]     (default: gemma-270m 2 9)

``forward(1)`` is a 1-token forward with the full float32 head (what ``generate()`` pays a token);
``verify(n) route`` is the engine's own ``SpeculativeDecoder.verify`` of a chain of n tokens after 64
cached ones, with the head's route forced by its switches (``core.runtime.head``: ``float32`` has
every cheap route off). Every probe runs once per pass, all interleaved, after two warm-up passes;
medians (the lab's one timer, ``core.common.timing.time_interleaved``). Routes this CPU or torch does
not run are left out (bf16 without bf16 units).
"""
import os
import sys

import torch

from core.api import build_decoder
from core.common.timing import time_interleaved
from core.api.request import DecodeRequest
from core.runtime.forward import forward_segment
from core.runtime.head import ROUTES, head_route
from core.runtime.tree import DraftTree

SIZES = (1, 5, 25)
PROMPT = ("Edward remained a week at the cottage; he was warmly pressed by Mrs. Dashwood to stay longer; but, as if "
          "he were bent only on self-mortification, he seemed resolved to be gone when his enjoyment among his "
          "friends was at the height.")


def route_switches(route: str) -> None:
    for name in ROUTES:
        os.environ[f"SDLAB_{name.upper()}_HEAD"] = "1" if name == route else "0"


def main() -> None:
    preset = sys.argv[1] if len(sys.argv) > 1 else "gemma-270m"
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    decoder, ids = build_decoder(DecodeRequest.of(PROMPT, preset, "none", max_new_tokens=64))
    ids = (ids * 4)[:65]
    decoder.begin(ids)
    decoder.prefill(ids)  # 64 cached tokens; the 65th is the root
    root, model = ids[-1], decoder.target.model
    weight = decoder.head.weight
    routes = ["float32"]
    for route in ROUTES:
        if route == "bf16" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            continue  # forced on a CPU without bf16 units it is only slow
        route_switches(route)
        if head_route(weight, decoder.head.outliers) == route:  # builds it once (fp16, int8: seconds)
            routes.append(route)

    def plain_forward():
        forward_segment(model, decoder.kv, [root], [-1])
        decoder.kv.commit([])

    def verify(n, route):
        tree = DraftTree()
        for i in range(n - 1):
            tree.add(ids[i + 1], i - 1, 0.5)

        def probe():
            route_switches(route)
            decoder.verify(root, tree)
            decoder.kv.commit([])
        return probe

    probes = {"forward(1)": plain_forward, **{f"verify({n}) {r}": verify(n, r) for n in SIZES for r in routes}}
    times = {name: samples.median for name, samples in time_interleaved(probes, repeats, warmup=2).items()}
    base = times["forward(1)"]
    print(f"load {os.getloadavg()[0]:.1f}, {torch.get_num_threads()} threads, cpu capability "
          f"{torch.backends.cpu.get_cpu_capability()}")
    for name, median in times.items():
        print(f"{name:20s} {median * 1e3:8.1f} ms   ÷ forward(1) {median / base:.2f}")
    decoder.end()


if __name__ == "__main__":
    main()
