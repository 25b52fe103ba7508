"""EAGLE's and EAGLE-3's anatomy: which target layers the drafter reads (their real indices, from its
weights' config, recorded in ``StepRecord.anatomy``), how it rolls forward on (feature, token) pairs
along the step's best chain, its draft vocabulary, and the training-time test with its measured
reason: acceptance by depth of a drafter trained with it against the same drafter trained without,
read from the held-out numbers shipped beside the weights (``python -m core.train.heldout``)."""
from __future__ import annotations

import html
import json
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.records.steps import AnatomyRecord, StepRecord

from ..i18n import t
from ..palette import drafter_color, visible
from .style import finish

ASSETS = Path(__file__).resolve().parents[2] / "assets"
MEASURED_PRESET = "tiny"  # the preset that ships a drafter trained without the training-time test
WITH_TTT, WITHOUT_TTT = "eagle3", "eagle3-no-ttt"  # the shipped folders compared
CHAIN_LABEL = "eagle3 k="  # the held-out row of a chain (the table of docs/drafters.md)
FEATURE = "#2b6cb0"  # a true target feature (the target's blue)
OWN = drafter_color("eagle3")  # a feature the drafter guessed itself


def token_label(text: str) -> str:
    """A token's text as a figure or caption shows it: whitespace made visible, markup escaped (a token may be
    "<b>" or "<br>", which Plotly and the page's Markdown would otherwise read as tags)."""
    return html.escape(visible(text))


def layer_roles(anatomy: AnatomyRecord, lang: str) -> list[str]:
    """The name of each read layer: low / middle / high for three, "last" for EAGLE's one."""
    if len(anatomy.target_layers) == 3:
        return [t(f"anat.layer_{role}", lang) for role in ("low", "middle", "high")]
    return [t("anat.layer_last" if i == anatomy.target_num_layers else "anat.layer_read", lang)
            for i in anatomy.target_layers]


def best_chain(record: StepRecord) -> list[str]:
    """The tokens on the path to the deepest candidate EAGLE-2 scored highest: what the drafter rolled
    forward on, one (feature, token) pair after another."""
    expansion = record.expansion
    if expansion is None or not expansion.tokens:
        return []
    deepest = max(expansion.depths)
    best = max((i for i, d in enumerate(expansion.depths) if d == deepest), key=lambda i: expansion.scores[i])
    path = []
    while best >= 0:
        path.append(token_label(expansion.texts[best]))
        best = expansion.parents[best]
    return path[::-1]


def fusion_figure(record: StepRecord, lang: str) -> go.Figure:
    """Top: the target's layers, the ones the drafter reads marked with their index and role; middle:
    the fusion into one feature; bottom: the drafter rolling forward along the step's best chain --
    the first pair reads the target's feature, every later one the drafter's own guess."""
    anatomy = record.anatomy
    layers, roles = anatomy.target_layers, layer_roles(anatomy, lang)
    count = anatomy.target_num_layers or max(layers)
    fig = go.Figure()
    centre = count / 4  # the fusion's label runs to its right
    edges_x, edges_y = [], []
    for layer in layers:
        edges_x += [layer, centre, None]
        edges_y += [2, 1, None]
    chain = [token_label(record.root.text)] + best_chain(record)
    step_x = [count * j / max(len(chain) - 1, 1) for j in range(len(chain))]
    edges_x += [centre, step_x[0], None]
    edges_y += [1, 0, None]
    fig.add_trace(go.Scatter(x=edges_x, y=edges_y, mode="lines", line={"color": FEATURE, "width": 2},
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=step_x, y=[0] * len(step_x), mode="lines", line={"color": OWN, "width": 2, "dash": "dot"},
                             hoverinfo="skip", showlegend=False))
    others = [i for i in range(count + 1) if i not in layers]
    fig.add_trace(go.Scatter(x=others, y=[2] * len(others), mode="markers", name=t("anat.layer_unread", lang),
                             marker={"symbol": "square", "size": 13, "color": "#e2e2e2"}, hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=list(layers), y=[2] * len(layers), mode="markers+text", name=t("anat.layer_legend", lang),
        text=[f"{i}<br>{role}" for i, role in zip(layers, roles)], textposition="top center",
        marker={"symbol": "square", "size": 15, "color": FEATURE}, hoverinfo="skip"))
    fuse = t("anat.fuse3", lang) if len(layers) > 1 else t("anat.fuse1", lang)
    fig.add_trace(go.Scatter(x=[centre], y=[1], mode="markers+text", text=[fuse], textposition="middle right",
                             name=t("anat.feature_true", lang), hoverinfo="skip",
                             marker={"symbol": "diamond", "size": 18, "color": FEATURE}))
    fig.add_trace(go.Scatter(
        x=step_x[:-1], y=[0] * (len(step_x) - 1), mode="markers+text", text=chain[:-1], textposition="bottom center",
        name=t("anat.drafter_pass", lang), hoverinfo="skip", textfont={"size": 13},
        marker={"symbol": "square", "size": 22, "color": OWN}))
    fig.add_trace(go.Scatter(x=step_x[-1:], y=[0], mode="markers+text", text=chain[-1:], textposition="bottom center",
                             name=t("anat.guess", lang), hoverinfo="skip", textfont={"size": 13},
                             marker={"symbol": "square-open", "size": 22, "color": OWN, "line": {"width": 2}}))
    fig.update_xaxes(visible=False, range=[-1, count + 1.5])
    fig.update_yaxes(range=[-0.6, 3.1], tickmode="array", tickvals=[0, 1, 2], showgrid=False,
                     ticktext=[t("anat.row_drafter", lang), t("anat.row_fuse", lang),
                               t("anat.row_target", lang, n=count)])
    return finish(fig, t("anat.fusion_title", lang, drafter=anatomy.drafter, step=record.step + 1), 380, below=True)


def fusion_caption(anatomy: AnatomyRecord, lang: str) -> str:
    """The read layers with their indices, and the draft vocabulary against the target's."""
    layers = ", ".join(f"{i} ({role})" for i, role in zip(anatomy.target_layers, layer_roles(anatomy, lang)))
    vocab = (t("anat.vocab_all", lang, vocab=anatomy.vocab_size) if anatomy.draft_vocab_size is None else
             t("anat.vocab_part", lang, draft=anatomy.draft_vocab_size, vocab=anatomy.vocab_size,
               share=anatomy.draft_vocab_size / anatomy.vocab_size))
    return t("anat.fusion_caption", lang, drafter=anatomy.drafter, layers=layers, n=anatomy.target_num_layers,
             vocab=vocab)


# ---- the training-time test ------------------------------------------------------------------------
def measured_preset(preset: str | None) -> str:
    """The preset whose measurement the scene shows: the run's when it ships a drafter trained without
    the test, else ``MEASURED_PRESET``'s."""
    named = bool(preset) and "/" not in preset and "\\" not in preset and preset not in (".", "..")  # not a folder
    if named and (ASSETS / preset / WITHOUT_TTT / "config.json").is_file():
        return preset
    return MEASURED_PRESET


@lru_cache(maxsize=4)
def ttt_measurement(preset: str) -> dict[str, dict] | None:
    """Per shipped folder (with and without the test): its held-out chain row (``label``,
    ``per_position``, ``tau``) and the unroll it was trained with (``ttt_steps``); None if not shipped."""
    rows = {}
    for folder in (WITH_TTT, WITHOUT_TTT):
        path = ASSETS / preset / folder / "config.json"
        if not path.is_file():
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
        chain = next((row for row in config.get("heldout", []) if row["label"].startswith(CHAIN_LABEL)), None)
        if chain is None:
            return None
        rows[folder] = {**chain, "ttt_steps": config["training"]["options"]["ttt_steps"]}
    return rows


def ttt_figure(anatomy: AnatomyRecord, lang: str, preset: str | None) -> go.Figure:
    """Top: what the drafter reads at each unrolled training step -- teacher forcing gives it the
    target's feature every time, the training-time test its own from the second step on, as drafting
    does. Bottom: acceptance by depth of the two shipped drafters (labelled with the preset measured)."""
    source = measured_preset(preset)
    measured = ttt_measurement(source)
    steps = max(anatomy.ttt_steps or 1, 2)
    fig = make_subplots(rows=2, cols=1, row_heights=[0.36, 0.64], vertical_spacing=0.22,
                        subplot_titles=(t("anat.ttt_plan", lang, n=steps),
                                        t("anat.ttt_measured", lang, preset=source)))
    for row, own_from in ((1, None), (0, 2)):
        kinds = ["own" if own_from and j >= own_from else "true" for j in range(1, steps + 1)]
        fig.add_trace(go.Scatter(
            x=list(range(1, steps + 1)), y=[row] * steps, mode="markers+text", showlegend=False, hoverinfo="skip",
            text=["f̂" if k == "own" else "f" for k in kinds], textfont={"color": "white", "size": 17},
            marker={"symbol": "square", "size": 34, "color": [OWN if k == "own" else FEATURE for k in kinds]}), 1, 1)
    for name, color in (("anat.ttt_true", FEATURE), ("anat.ttt_own", OWN)):  # what the two colours of boxes mean
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=t(name, lang),
                                 marker={"symbol": "square", "size": 12, "color": color}), 1, 1)
    fig.update_yaxes(tickmode="array", tickvals=[0, 1], range=[-0.6, 1.6], showgrid=False, row=1, col=1,
                     ticktext=[t("anat.ttt_row", lang), t("anat.tf_row", lang)])
    fig.update_xaxes(tickmode="array", tickvals=list(range(1, steps + 1)), range=[0.4, steps + 0.6], showgrid=False,
                     ticktext=[t("anat.ttt_step", lang, j=j) for j in range(1, steps + 1)], row=1, col=1)
    if measured is not None:
        for folder, dash, place in ((WITH_TTT, None, "top center"), (WITHOUT_TTT, "dash", "bottom center")):
            rates = measured[folder]["per_position"]
            fig.add_trace(go.Scatter(
                x=list(range(1, len(rates) + 1)), y=rates, mode="lines+markers+text",
                text=[f"{r:.2f}" for r in rates], textposition=place,
                name=t("anat.ttt_line", lang, folder=folder, n=measured[folder]["ttt_steps"], preset=source),
                line={"color": OWN if folder == WITH_TTT else "#7a7a7a", "dash": dash, "width": 2.5}), 2, 1)
    fig.update_xaxes(title=t("tree.depth", lang), dtick=1, row=2, col=1)
    fig.update_yaxes(title=t("anat.accept_axis", lang), range=[-0.08, 1.08], row=2, col=1)
    fig = finish(fig, t("anat.ttt_title", lang), 560, below=True)
    return fig.update_layout(margin={"t": 100})  # the title above the first part's own


def ttt_caption(anatomy: AnatomyRecord, lang: str, preset: str | None) -> str:
    """How this drafter was trained, and what the shipped pair measured; on a preset that ships no
    drafter trained without the test, that the numbers are another preset's."""
    source = measured_preset(preset)
    measured = ttt_measurement(source)
    trained = (t("anat.ttt_unknown", lang) if anatomy.ttt_steps is None else
               t("anat.ttt_trained", lang, n=anatomy.ttt_steps))
    if measured is None:
        return trained + " " + t("anat.ttt_none", lang)
    with_, without = measured[WITH_TTT], measured[WITHOUT_TTT]
    line = t("anat.ttt_caption", lang, preset=source, depth=len(with_["per_position"]),
             a_with=with_["per_position"][-1], a_without=without["per_position"][-1], tau_with=with_["tau"],
             tau_without=without["tau"], prompts=with_["prompts"])
    if preset and source != preset:
        line += " " + t("anat.ttt_other", lang, preset=preset, source=source)
    return trained + " " + line
