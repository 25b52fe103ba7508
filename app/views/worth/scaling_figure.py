"""What more data buys each feature drafter: held-out acceptance by depth and tau against the
training positions, from ``python -m core.train.scaling`` (a shipped JSON result)."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots


from ...figures.style import empty, finish
from ...i18n import t
from ...palette import drafter_color

DASHES = ("dot", "dash", "solid")  # the smallest share dotted, all of the data solid


def scaling_figure(result: dict | None, lang: str) -> go.Figure:
    """``result``: ``{"depth": D, "runs": [{drafter, fraction, positions, tau, per_position}, ...]}``."""
    if not result or not result.get("runs"):
        return empty(t("scaling.none", lang), 380)
    runs = result["runs"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(t("scaling.by_depth", lang), t("scaling.tau", lang)))
    fractions = sorted({r["fraction"] for r in runs})
    for drafter in dict.fromkeys(r["drafter"] for r in runs):
        mine = sorted((r for r in runs if r["drafter"] == drafter), key=lambda r: r["fraction"])
        color = drafter_color(drafter)
        for r in mine:
            dash = DASHES[len(DASHES) - len(fractions) + fractions.index(r["fraction"])] if len(fractions) <= 3 \
                else "solid"
            name = t("scaling.run", lang, drafter=drafter, share=r["fraction"], positions=r["positions"])
            fig.add_trace(go.Scatter(
                x=list(range(1, len(r["per_position"]) + 1)), y=r["per_position"], name=name, mode="lines+markers",
                line={"color": color, "dash": dash, "width": 2.5}), 1, 1)
        fig.add_trace(go.Scatter(
            x=[r["positions"] for r in mine], y=[r["tau"] for r in mine], name=drafter, mode="lines+markers",
            showlegend=False, line={"color": color, "width": 3}, marker={"size": 9},
            text=[f"{r['fraction']:.0%}" for r in mine], textposition="top left"), 1, 2)
    fig.update_xaxes(title=t("scaling.depth", lang), dtick=1, row=1, col=1)
    fig.update_yaxes(title=t("scaling.acceptance", lang), range=[0, 1], row=1, col=1)
    fig.update_xaxes(title=t("scaling.positions", lang), type="log", row=1, col=2)
    fig.update_yaxes(title="τ", rangemode="tozero", row=1, col=2)
    return finish(fig, t("scaling.title", lang), 420, below=True)
