"""Text views of records: the coloured output text, the one-sentence step story, run summaries."""
from __future__ import annotations

import html
import re

from core.records.metrics import PlainReference, tally
from core.records.steps import StepRecord

from .i18n import has, t
from .palette import COLORS, kind_key, resampled, visible

TEXT_KINDS = ("accepted", "correction", "bonus", "target")


def legend_html(lang: str, resample: bool = False) -> str:
    """The text panel's colour key; ``resample``: the run samples, its orange tokens are resamples."""
    chips = [f'<span class="sdl-chip" style="border-color:{COLORS["prompt"]}">{t("kind.prompt", lang)}</span>']
    chips += [
        f'<span class="sdl-chip" style="background:{COLORS[kind]}22;border-color:{COLORS[kind]}">'
        f'{t(kind_key(kind, resample), lang)}</span>'
        for kind in TEXT_KINDS
    ]
    return '<div class="sdl-legend">' + " ".join(chips) + "</div>"


MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def markdown_text(value) -> str:
    """Any text from a user or a file, shown literally in a Markdown component: HTML escaped (no
    tag survives, so no remote image loads) and Markdown punctuation backslash-escaped (no link,
    image or emphasis); line breaks kept."""
    escaped = html.escape(str(value), quote=False)
    return MARKDOWN_SPECIAL.sub(r"\\\1", escaped).replace("\n", "<br>")


def _piece(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


def _token_piece(text: str) -> str:
    """A token's text in the text panel: a line break is drawn as ↵ too, else a newline token is an
    empty box at the end of a line."""
    return html.escape(text).replace("\n", "↵<br>")


def text_html(prompt: str, records: list[StepRecord], lang: str) -> str:
    """The prompt (plain) and every emitted token coloured by how it came; hovering says the step, how
    it came and the token, whitespace made visible."""
    parts = [f'<span class="sdl-prompt">{_piece(prompt)}</span>']
    last = len(records) - 1
    for i, record in enumerate(records):
        for token in record.emitted:
            label = t("text.hover", lang, step=record.step + 1, kind=t(kind_key(token.kind, resampled(record)), lang),
                      text=visible(token.text), token=token.token)
            current = " sdl-current" if i == last else ""
            parts.append(
                f'<span class="sdl-tok{current}" title="{html.escape(label)}" '
                f'style="background:{COLORS[token.kind]}22;border-bottom:3px solid {COLORS[token.kind]}">'
                f"{_token_piece(token.text) or '&#8203;'}</span>"
            )
    return legend_html(lang, any(resampled(r) for r in records)) + '<div class="sdl-text">' + "".join(parts) + "</div>"


def _ordinal(n: int, lang: str) -> str:
    if lang == "zh":
        return f"第 {n} 个"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"the {n}{suffix}"


def step_sentence(record: StepRecord, lang: str, budget: int | None = None) -> str:
    """One plain sentence of what the step did, e.g. "drafted 5, the target accepted 3 and corrected the 4th";
    ``budget``: the run's max_new_tokens, so a step the budget left no room to draft says so."""
    drafted, kept = len(record.nodes), record.accepted_length
    shape = "chain" if all(n.depth == i + 1 for i, n in enumerate(record.nodes)) else "tree"
    nxt = markdown_text(visible(record.next.text))
    if drafted == 0:
        what = t("say.no_draft", lang, token=nxt)
    elif record.next.kind == "bonus":
        what = t(f"say.all_{shape}", lang, drafted=drafted, kept=kept, token=nxt)
    else:
        missed = [markdown_text(visible(n.text)) for n in record.nodes
                  if n.status == "rejected" and n.depth == kept + 1]
        verb = "resampled" if resampled(record) else "corrected"
        what = t(f"say.{verb}_{shape}", lang, drafted=drafted, kept=kept, nth=_ordinal(kept + 1, lang),
                 token=nxt, guess=" / ".join(missed))
    if drafted and record.draft_forward_s:  # EAGLE-3's chain of k: k forwards; P-EAGLE's: one
        what += t("say.forwards", lang, n=len(record.draft_forward_s), ms=sum(record.draft_forward_s) * 1e3)
    rate = record.new_tokens_total / record.target_forwards_total
    sentence = t("say.step", lang, step=record.step + 1, what=what, rate=rate)
    if record.finished:
        sentence += " " + t("say.finished", lang, tokens=record.new_tokens_total, forwards=record.target_forwards_total)
    if record.decision is not None:
        sentence += f'<div class="sdl-why">{decision_line(record, lang, budget)}</div>'
    elif draft_room(record, budget) == 0:
        sentence += f'<div class="sdl-why">{t("why.budget", lang)}</div>'
    return sentence


def draft_room(record: StepRecord, budget: int | None) -> int | None:
    """The most tokens the step could draft within the run's ``budget`` (max_new_tokens): the engine
    drafts at most one fewer than the tokens left, the last one being the target's (None: no budget)."""
    if not isinstance(budget, int) or isinstance(budget, bool):
        return None
    return max(0, budget - (record.new_tokens_total - len(record.emitted)) - 1)


def decision_line(record: StepRecord, lang: str, budget: int | None = None) -> str:
    """Why the goodput controller verified as much as it did this step (``--k auto``), in plain words,
    with the numbers behind it (expected and measured, in milliseconds) in a closed detail. With the
    run's ``budget`` (max_new_tokens), a step it cut short blames the budget, not the drafting cost."""
    d, room = record.decision, draft_room(record, budget)
    if room == 0:  # one token left: the target's own; the controller records this as "off"
        why = t("why.budget", lang)
    elif d.probe:
        why = t("why.probe", lang, depth=d.depth or 1)
    else:
        why = t(f"why.{d.reason}", lang, offered=d.offered, chosen=d.chosen, expected=d.expected_tokens)
        if d.depth and d.reason in ("part", "all"):  # traces written before the depth was recorded have None
            depth = (t("why.depth_budget", lang, depth=d.depth, left=room + 1) if d.depth == room
                     else t("why.depth", lang, depth=d.depth))
            why = depth + " " + why
    realised = "—" if d.realised_gain is None else f"{d.realised_gain:.2f}"
    numbers = t("why.detail", lang, expected=d.expected_tokens, gain=d.expected_gain, tokens=len(record.emitted),
                ms=(record.draft_s + record.verify_s) * 1e3, draft_ms=record.draft_s * 1e3,
                verify_ms=record.verify_s * 1e3, plain_ms=d.plain_step_s * 1e3, realised=realised,
                offered=d.offered, chosen=d.chosen)
    if record.disturbed:
        why += " " + t("why.disturbed_words", lang)
        numbers += "<br>" + disturbed_line(record, lang)
    return (f'{why}<details class="sdl-why-numbers"><summary>{t("why.numbers", lang)}</summary>'
            f"{numbers}</details>")


def disturbed_line(record: StepRecord, lang: str) -> str:
    """Why a step's times do not count (``StepRecord.disturbed``), with the measure that said so."""
    seconds = record.draft_s + record.verify_s
    if record.disturbed == "cpu" and record.wait_s is not None and seconds > 0:
        return t("why.disturbed_cpu", lang, share=record.wait_s / seconds)
    if record.disturbed == "plain":
        return t("why.disturbed_plain", lang)
    expected = record.decision.expected_seconds if record.decision is not None else None
    return t("why.disturbed_slow", lang, slow=seconds / (expected + record.draft_s) if expected else 0.0)


def reference_note(reference: PlainReference | None, lang: str) -> str:
    """What the plain lane, the break-even point and the why-lines compare with: the run's one plain
    reference (``core.records.metrics.plain_reference``), where it comes from, and how many steps the
    CPU disturbed; without one, how to get it."""
    if reference is None:
        return t("even.no_curve", lang)
    note = t("ref.note", lang, ms=reference.seconds * 1e3, source=t("ref." + reference.source, lang))
    if reference.disturbed:
        note += " " + t("ref.disturbed", lang, n=reference.disturbed, steps=reference.steps)
    return note


def _fmt(value, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "–"


def _stop_reason(reason: str, lang: str) -> str:
    return t("stop." + reason, lang) if has("stop." + reason) else markdown_text(reason)


def compute_time(result: dict, records: list[StepRecord], lang: str) -> str:
    """The engine's own time for the run (``wall_s``: waits between stepped steps are not in it),
    split into drafting and verifying summed from the records, and the rest (prefill, bookkeeping)."""
    wall = result.get("wall_s")
    if not isinstance(wall, (int, float)):
        return "–"
    if not records:
        return f"{wall:.2f} s"
    totals = tally(records)
    return t("sum.wall_parts", lang, wall=wall, draft=totals.all_draft_s, verify=totals.all_verify_s,
             other=max(0.0, wall - totals.all_draft_s - totals.all_verify_s))


def summary_markdown(result: dict, lang: str, records: list[StepRecord] | None = None) -> str:
    """A short table of a finished or stopped run (a RunResult's ``to_dict()`` or a trace summary,
    with its StepRecords for the split of the compute time)."""
    kv = result.get("kv") or {}
    rows = [
        (t("sum.stop_reason", lang), _stop_reason(str(result.get("stop_reason", "")), lang)),
        (t("sum.new_tokens", lang), _fmt(result.get("new_tokens"), "d")),
        (t("sum.target_forwards", lang), _fmt(result.get("target_forwards"), "d")),
        (t("sum.tau", lang), _fmt(result.get("mean_accepted_tokens"), ".2f")),
        (t("sum.acceptance", lang), _fmt(result.get("acceptance_rate"), ".1%")),
        (t("sum.wall", lang), compute_time(result, records or [], lang)),
        (t("sum.kv_peak", lang), _fmt(kv.get("peak_blocks_in_use"), "d")),
        (t("sum.kv_after", lang), _fmt(kv.get("blocks_in_use_after"), "d")),
        (t("ctl.precision", lang), (result.get("settings") or {}).get("target_precision") or "float32"),
    ]
    lines = [f"| {t('sum.what', lang)} | {t('sum.value', lang)} |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    table = "\n".join(lines)
    if any(len({n.depth for n in r.nodes}) < len(r.nodes) for r in records or []):  # trees: siblings
        table += "\n\n" + f'<span class="sdl-note">{t("sum.tree_note", lang)}</span>'
    return table
