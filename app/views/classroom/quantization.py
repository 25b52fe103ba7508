"""The classroom's scene on quantization against speculation, drawn from a shipped bench result
(``python -m core bench --target-precision float32,int8``, docs/quantized.md): the two targets'
verify-cost curves v(n), and tokens per second of plain decoding and of speculation on each (and the
CPU peer, llama.cpp, where the run timed it). The lesson it carries: a cheaper target forward makes
each drafted token worth less -- v(n) rises faster, so speculation gains less over its own baseline,
even where it is the fastest way to decode."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ...figures.style import finish
from ...i18n import t
from ...palette import OTHER_DRAFTER, drafter_color

QUANT_RESULT = (Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "gemma-cpu-int8-target-chat"
                / "bench.json")
INT8 = ":target_precision=int8"
SPECULATION = ("eagle3:auto", "hybrid:auto")  # the rows the scene sets against plain decoding
PEER_ROWS = ("llamacpp:none", "llamacpp:lookup")


@lru_cache(maxsize=1)
def quant_result() -> dict | None:
    """The shipped float32-and-int8 bench result, if there is one."""
    return json.loads(QUANT_RESULT.read_text(encoding="utf-8")) if QUANT_RESULT.exists() else None


def curves(result: dict) -> dict[str, tuple[list[int], list[float], float]]:
    """Per precision: the verify probe's (n, v(n), one-token ms) with the LM head."""
    out: dict[str, tuple[list[int], list[float], float]] = {}
    for name, precision in (("target", "float32"), ("target int8", "int8")):
        rows = [r for r in result["verify_ratio"]["rows"] if r["model"] == name and r["lm_head"]]
        if rows:
            out[precision] = ([r["n"] for r in rows], [r["verify_ratio"] for r in rows], rows[0]["ms"])
    return out


def speeds(result: dict) -> dict[str, dict[str, float]]:
    """tokens/s of ``none`` and each ``SPECULATION`` row, per precision; llama.cpp's rows under "llama.cpp"."""
    rows = result["drafters"]
    out = {"float32": {}, "int8": {}}
    for name in ("none", *SPECULATION):
        for precision, arm in (("float32", name), ("int8", name + INT8)):
            if arm in rows:
                out[precision][name] = rows[arm]["tokens_per_s"]
    peer = result.get("llamacpp") or {}
    out["llama.cpp"] = {name.split(":", 1)[1]: peer[name]["tokens_per_s"] for name in PEER_ROWS if name in peer}
    return {k: v for k, v in out.items() if v}


def quant_figure(result: dict | None, lang: str) -> go.Figure:
    """v(n) of both targets (left) and tokens/s per target and way of decoding (right)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(t("quant.plot_cost", lang), t("quant.plot_speed", lang)))
    if result is None:
        return finish(fig, t("quant.none", lang), 380)
    for precision, (ns, ratios, ms) in curves(result).items():
        fig.add_trace(go.Scatter(x=ns, y=ratios, mode="lines+markers", name=f"{precision} ({ms:.1f} ms @ n=1)",
                                 line={"width": 3 if precision == "int8" else 2,
                                       "dash": "solid" if precision == "int8" else "dash",
                                       "color": drafter_color("eagle3") if precision == "int8" else OTHER_DRAFTER}),
                      1, 1)
    for group, rows in speeds(result).items():
        fig.add_trace(go.Bar(x=[f"{group}<br>{name}" for name in rows], y=list(rows.values()), showlegend=False,
                             marker={"color": [drafter_color(name) for name in rows]},
                             text=[f"{v:.1f}" for v in rows.values()], textposition="outside"), 1, 2)
    fig.update_xaxes(title=t("axis.query_tokens", lang), row=1, col=1)
    fig.update_yaxes(title="v(n)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=t("quant.axis_speed", lang), rangemode="tozero", row=1, col=2)
    return finish(fig, "", 400, below=True)


def quant_caption(result: dict | None, lang: str) -> str:
    """The scene's reading of the numbers: how much cheaper int8's forward is, how much faster its
    v(n) rises, and what that leaves each precision's best speculation over its own plain decoding."""
    if result is None:
        return t("quant.none", lang)
    cost, speed = curves(result), speeds(result)
    if not {"float32", "int8"} <= set(cost) or not {"float32", "int8"} <= set(speed):
        return t("quant.none", lang)

    def v_at(precision: str, n: int) -> float:
        ns, ratios, _ = cost[precision]
        return ratios[ns.index(n)] if n in ns else ratios[-1]

    def best(precision: str) -> tuple[str, float]:
        spec = {k: v for k, v in speed[precision].items() if k != "none"}
        name = max(spec, key=spec.get)
        return name, spec[name] / speed[precision]["none"]

    (f_name, f_gain), (q_name, q_gain) = best("float32"), best("int8")
    text = t("quant.caption", lang, hardware=result.get("hardware", "–"), f_ms=cost["float32"][2],
             q_ms=cost["int8"][2], f_v=v_at("float32", 5), q_v=v_at("int8", 5), f_name=f_name, f_gain=f_gain,
             q_name=q_name, q_gain=q_gain, plain=speed["int8"]["none"] / speed["float32"]["none"],
             top=speed["int8"][q_name])
    if "llama.cpp" in speed:
        text += " " + t("quant.peer", lang, peer=max(speed["llama.cpp"].values()))
    return text
