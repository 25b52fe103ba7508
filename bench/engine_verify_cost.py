"""The engine's own ``verify`` of n tokens ÷ one plain 1-token forward, on a preset: a before/after probe.

    python bench/engine_verify_cost.py [PRESET] [THREADS] [REPEATS]     (default: gemma-270m 2 12)

Calls only ``SpeculativeDecoder.verify`` and ``core.runtime.forward.forward_segment`` (a 1-token forward with
the full head), which exist across versions of the engine, so the same command measures a commit
before and after a change of the verify path. A chain of n - 1 drafted nodes after 64 cached
tokens; every probe runs once per pass, all interleaved, two warm-up passes, medians.
"""
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.api import build_decoder  # noqa: E402
from core.runtime.forward import forward_segment  # noqa: E402
from core.runtime.tree import DraftTree  # noqa: E402

SIZES = (1, 2, 5, 9, 17, 25)
PROMPT = ("Edward remained a week at the cottage; he was warmly pressed by Mrs. Dashwood to stay longer; but, as if "
          "he were bent only on self-mortification, he seemed resolved to be gone when his enjoyment among his "
          "friends was at the height.")


def main() -> None:
    preset = sys.argv[1] if len(sys.argv) > 1 else "gemma-270m"
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    try:  # the typed request of today's engine; a plain call on versions from before it
        from core.request import DecodeRequest
    except ImportError:
        decoder, ids = build_decoder(PROMPT, preset, "none", max_new_tokens=64)
    else:
        decoder, ids = build_decoder(DecodeRequest.of(PROMPT, preset, "none", max_new_tokens=64))
    ids = (ids * 4)[:65]
    decoder.begin(ids)
    decoder.prefill(ids)  # 64 cached tokens; the 65th is the root
    root, model = ids[-1], decoder.target.model

    def plain_forward():
        forward_segment(model, decoder.kv, [root], [-1])
        decoder.kv.commit([])

    def verify(n):
        tree = DraftTree()
        for i in range(n - 1):
            tree.add(ids[i + 1], i - 1, 0.5)
        return lambda: (decoder.verify(root, tree), decoder.kv.commit([]))

    probes = {"forward(1)": plain_forward, **{f"verify({n})": verify(n) for n in SIZES}}
    for _ in range(2):
        for probe in probes.values():
            probe()
    times = {name: [] for name in probes}
    for _ in range(repeats):
        for name, probe in probes.items():
            start = time.perf_counter()
            probe()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["forward(1)"])
    for name, values in times.items():
        print(f"{name:11s} {statistics.median(values) * 1e3:8.1f} ms   ÷ forward(1) {statistics.median(values) / base:.2f}")
    decoder.end()


if __name__ == "__main__":
    main()
