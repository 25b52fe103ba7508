"""Where the time goes: one request as lanes of steps, each step a bar split into drafting and
verifying time, scaled to the measured seconds, with the tokens it emitted marked at its end.

A drafting bar is cut where the engine timed each drafting forward (``StepRecord.draft_forward_s``): EAGLE-3's
chain of k shows k pieces, P-EAGLE's one forward one piece, and the rest of the drafting time (choosing the
tree) a last piece.

Step by step draws two lanes: the run itself, from its StepRecords, and plain decoding -- one step
per token, each as long as the run's plain reference (``core.records.metrics.plain_reference``: the
value its why-lines and break-even point read), which the lane's note names. Compare draws one lane per drafter from
the repeat its table reports (the median wall time); its ``none`` lane is a real plain run. A lane
with the run's whole engine time (``wall_s``) ends there, the time outside draft and verify (prefill,
bookkeeping) drawn as its own grey segment, so the bar reads what the table reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import plotly.graph_objects as go

from core.records.steps import StepRecord

from ..i18n import t
from ..palette import COLORS
from .style import finish
from .tree import text_width

MAX_MARKED_STEPS = 80  # more steps than this on a lane: token counts on hover only
LANE_LABEL_PX = 130  # a lane's name is wrapped to lines this wide: on a phone the bars keep the rest


@dataclass(frozen=True)
class Lane:
    name: str
    draft_s: list[float]  # per step
    verify_s: list[float]
    tokens: list[int]  # emitted per step
    wall_s: float | None = None  # the run's whole engine time, when it is known (``RunResult.wall_s``)
    draft_forward_s: list[tuple[float, ...]] | None = None  # per step, each drafting forward's seconds

    @classmethod
    def of(cls, name: str, records: list[StepRecord], wall_s: float | None = None) -> "Lane":
        return cls(name, [r.draft_s for r in records], [r.verify_s for r in records], [len(r.emitted) for r in records],
                   wall_s, [tuple(r.draft_forward_s or ()) for r in records])

    def draft_segments(self, step: int) -> list[float]:
        """Step ``step``'s drafting bar in pieces: one per drafting forward the engine timed (EAGLE-3's k,
        P-EAGLE's one), then the rest of its drafting time (choosing and building the tree); one piece
        when no forward was timed."""
        forwards = list(self.draft_forward_s[step]) if self.draft_forward_s else []
        rest = self.draft_s[step] - sum(forwards)
        return [*forwards, rest] if forwards and rest > 0 else forwards or [self.draft_s[step]]

    @classmethod
    def plain(cls, name: str, tokens: int, forward_s: float) -> "Lane":
        """``tokens`` one-token steps of ``forward_s`` each (a measured forward, not this request's)."""
        return cls(name, [0.0] * tokens, [forward_s] * tokens, [1] * tokens)

    @property
    def starts(self) -> list[float]:
        """When each step begins: the steps back to back from 0 (time between steps is not the engine's)."""
        out, clock = [], 0.0
        for draft, verify in zip(self.draft_s, self.verify_s):
            out.append(clock)
            clock += draft + verify
        return out

    @property
    def steps_s(self) -> float:
        """Drafting and verifying, summed over the steps."""
        return sum(self.draft_s) + sum(self.verify_s)

    @property
    def total_s(self) -> float:
        """Where the lane ends: the run's whole engine time when known, else its steps'."""
        return max(self.wall_s or 0.0, self.steps_s)


def wrap_label(text: str, width: float, font: int = 12) -> str:
    """``text`` in lines at most ``width`` pixels wide (``<br>`` between them), broken at spaces or between
    two CJK characters, never inside a Latin word or a number."""
    pieces = re.findall(r"\s+|[\x21-\x7e]+|.", text)
    lines, line = [], ""
    for piece in pieces:
        if line.strip() and text_width(line + piece, font) > width:
            lines.append(line.rstrip())
            line = piece.lstrip()
        else:
            line += piece
    lines.append(line.rstrip())
    return "<br>".join(lines)


def timeline_figure(lanes: list[Lane], lang: str, title: str = "") -> go.Figure:
    """One horizontal lane per ``Lane``, top to bottom in the order given."""
    fig = go.Figure()
    names = [lane.name for lane in lanes]
    for part, color in (("draft", COLORS["proposed"]), ("verify", COLORS["target"])):
        x, base, y, hover = [], [], [], []
        for lane in lanes:
            for i, (start, draft, verify) in enumerate(zip(lane.starts, lane.draft_s, lane.verify_s)):
                pieces = lane.draft_segments(i) if part == "draft" else [verify]
                offset = start + (draft if part == "verify" else 0.0)
                timed = len(lane.draft_forward_s[i]) if part == "draft" and lane.draft_forward_s else 0
                for j, value in enumerate(pieces):
                    x.append(value)
                    base.append(offset)
                    offset += value
                    y.append(lane.name)
                    what = t(f"time.{part}", lang)
                    if timed:
                        what = t("time.forward", lang, n=j + 1, of=timed) if j < timed else t("time.draft_rest", lang)
                    hover.append(t("time.hover", lang, step=i + 1, part=what, ms=value * 1e3, tokens=lane.tokens[i]))
        fig.add_trace(go.Bar(x=x, base=base, y=y, orientation="h", name=t(f"time.{part}", lang), marker_color=color,
                             marker_line={"color": "white", "width": 1 if part == "draft" else 0.5},
                             hovertext=hover, hoverinfo="text"))
    other = [lane for lane in lanes if lane.total_s > lane.steps_s]
    if other:
        fig.add_trace(go.Bar(
            x=[lane.total_s - lane.steps_s for lane in other], base=[lane.steps_s for lane in other],
            y=[lane.name for lane in other], orientation="h", name=t("time.other", lang), marker_color="#d9d9d9",
            hovertext=[t("time.other_hover", lang, ms=(lane.total_s - lane.steps_s) * 1e3) for lane in other],
            hoverinfo="text"))
    ends_x, ends_y, counts = [], [], []
    for lane in lanes:
        for start, draft, verify, tokens in zip(lane.starts, lane.draft_s, lane.verify_s, lane.tokens):
            ends_x.append(start + draft + verify)
            ends_y.append(lane.name)
            counts.append(tokens)
    few = max((len(lane.tokens) for lane in lanes), default=0) <= MAX_MARKED_STEPS
    fig.add_trace(go.Scatter(
        x=ends_x, y=ends_y, mode="markers+text" if few else "markers", text=[f"+{n}" for n in counts],
        textposition="top center", textfont={"size": 9, "color": COLORS["accepted"]},
        name=t("time.tokens", lang), hoverinfo="skip",
        marker={"symbol": "line-ns-open", "size": 14, "color": COLORS["accepted"], "line": {"width": 2}}))
    for lane in lanes:
        fig.add_annotation(x=lane.total_s, y=lane.name, xanchor="left", showarrow=False, xshift=6,
                           text=t("time.total", lang, s=lane.total_s, tokens=sum(lane.tokens)),
                           font={"size": 11, "color": "#444444"})
    longest = max((lane.total_s for lane in lanes), default=1.0) or 1.0
    fig.update_xaxes(title=t("time.axis", lang), range=[0, longest * 1.22])
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(names)), automargin=True,
                     tickmode="array", tickvals=names, ticktext=[wrap_label(name, LANE_LABEL_PX) for name in names])
    fig.update_layout(barmode="overlay", bargap=0.45)
    return finish(fig, title or t("time.title", lang), 150 + 70 * len(lanes))
