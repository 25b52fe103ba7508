"""Real traces of short tiny runs (written by the engine) for the trace reader's tests, and a
replay renderer that measures what the Replay view would send."""
from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TRACE = ROOT / "assets" / "traces" / "example-tiny.jsonl"
GEMMA_TRACE = ROOT / "assets" / "traces" / "example-gemma-270m.jsonl"  # hybrid, --tree auto: Replay's screenshot
RUNS = {  # name -> core.generate options: a chain, a full tree, EAGLE-2's pruned tree (expansion), Medusa's heads,
    # sampling
    "chain": dict(drafter="draft", k=4),
    "tree": dict(drafter="draft", tree="2x3", block_size=4),
    "eagle3": dict(drafter="eagle3", tree="3x4", eagle_nodes=10),
    "medusa": dict(drafter="medusa", tree="2x3"),  # each head's top tokens (StepRecord.anatomy)
    "sampled": dict(drafter="ngram", temperature=0.8, seed=3),
}
RENDER_BUDGET_S = 2.0
RESPONSE_BUDGET_BYTES = 5 * 2**20


def write_real_traces(folder: Path, max_new_tokens: int = 12) -> dict[str, Path]:
    """One trace per run in ``RUNS``, plus a run stopped after two steps (its KV returned)."""
    from core import DecodeRequest, build_decoder, generate
    from core.records.steps import write_trace

    paths = {}
    for name, options in RUNS.items():
        paths[name] = folder / f"{name}.jsonl"
        generate("我爱中国。我爱", max_new_tokens=max_new_tokens, trace=paths[name], **options)
    decoder, prompt_ids = build_decoder(DecodeRequest.of("It is a truth", drafter="draft", max_new_tokens=max_new_tokens))
    steps = decoder.steps(prompt_ids)
    next(steps), next(steps)
    steps.close()
    paths["stopped"] = folder / "stopped.jsonl"
    write_trace(paths["stopped"], decoder.result)
    return paths


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def write_blow_up_traces(folder: Path) -> tuple[Path, Path]:
    """The two traces of the hardening pass, from the shipped example: ``deep.jsonl`` (3 KB, a node
    1,000,000 levels deep) and ``wide.jsonl`` (8 MB, a 2000 x 4096 slot grid)."""
    lines = read_lines(EXAMPLE_TRACE)
    deep = copy.deepcopy(lines[:2] + lines[-1:])
    deep[1]["nodes"][-1]["depth"] = 1_000_000
    deep[2].update(new_tokens=1, tokens=deep[2]["tokens"][:1], target_forwards=1)
    wide = copy.deepcopy(deep)
    wide[1]["nodes"][-1]["depth"] = 4
    wide[1]["kv"]["slot_grid"] = {str(b): "L" * 4096 for b in range(2000)}
    return write_lines(folder / "deep.jsonl", deep), write_lines(folder / "wide.jsonl", wide)


@dataclass
class Rendered:
    seconds: float  # CPU time of this process: the work done, whatever else shares the machine
    size: int  # bytes of the JSON the page would receive
    markdown: str  # every Markdown and HTML text shown


def render_replay(trace, lang: str = "en") -> Rendered:
    """What the Replay view shows after the upload (step 1) and at the last step, as the app
    builds it (``ReplayView.render`` with stand-in components)."""
    from app.session import Session
    from app.views.panels import StepPanels
    from app.views.replay import ReplayState
    from app.views.replay.view import ReplayView

    panels = StepPanels(*(object() for _ in range(6)))
    view = ReplayView(panels, object(), object(), object(), object())
    session = Session()
    session.of(ReplayState).trace = trace
    start, size, texts = time.process_time(), 0, []
    for index in sorted({0, len(trace.steps) - 1}):
        session.of(ReplayState).index = index
        for value in view.render(session, lang).values():
            if isinstance(value, go.Figure):
                size += len(value.to_json())
            else:
                text = json.dumps(value, ensure_ascii=False, default=str)
                size += len(text.encode("utf-8"))
                texts.append(value if isinstance(value, str) else "")
    return Rendered(time.process_time() - start, size, "\n".join(texts))
