"""The classroom's predict mode: before the step is shown the class answers one question about it --
which drafted tokens the target keeps, which it refuses first, how many tokens the step writes --
then sees the truth, why, and a running score per question; and a batch-size question answered by a
measured sweep. Outside the live part's column, so it stays in presentation mode. It steps a run of
its own (``ClassroomState.predict_run``), with the live part's settings."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from core import UserError
from core.records.steps import StepRecord

from ...controls import choice
from ...figures import empty, tree_figure
from ...figures.tree import TreeDrawing, draw_tree
from ...guard import guarded
from ...i18n import t
from ...labels import Labels
from ...palette import visible
from ...render import markdown_text
from ...runs import Run
from ...session import Session, ensure
from ...page_limits import RunGate
from ..page import Page
from .exercises import KINDS, NONE, Check, count_choices, stop_of
from .prediction import Predict, batch_question, drafted, hidden, judged
from .state import ClassroomState

KIND_KEYS = [("predict.kind_keep", "keep"), ("predict.kind_reject", "reject"), ("predict.kind_count", "count")]
TITLE = {"keep": "predict.guess_title", "reject": "predict.reject_title", "count": "predict.count_title"}
ASK = {"keep": "predict.ask", "reject": "predict.reject_ask", "count": "predict.count_ask"}


@dataclass
class PredictView:
    tree: gr.Plot
    choices: gr.CheckboxGroup  # the keep question's answer
    score: gr.Markdown  # the question's prompt, then the verdict, why, and the scores
    question: gr.Markdown
    answer: gr.Markdown
    reject: gr.Radio  # the reject question's answer: a drafted node, or none
    count: gr.Radio  # the count question's answer
    sweep: dict | None = None  # the preset's shipped batch sweep: it asks and answers the batch question

    @property
    def outputs(self) -> list:
        return [self.tree, self.choices, self.score, self.question, self.answer, self.reject, self.count]

    def render(self, session: Session, lang: str) -> dict:
        mine = session.of(ClassroomState)
        return {**self.render_step(mine, lang), **self.render_batch(mine, lang)}

    def render_batch(self, mine: ClassroomState, lang: str) -> dict:
        """The batch question, and its answer once the class has guessed."""
        question, answer = question_texts(self.sweep, lang)
        return {self.question: question, self.answer: answer if mine.batch_answered else ""}

    def render_step(self, mine: ClassroomState, lang: str) -> dict:
        """The step being guessed (its verdict hidden) or revealed, and the scores. Only the asked question's
        answer field shows; until the reveal nothing drawn depends on the verify."""
        state, run = mine.predict, mine.predict_run
        if state.phase == "idle" or run is None or state.step >= len(run.records):
            return {self.tree: empty(t("predict.hint", lang)), **self.fields(state.kind, None, lang),
                    self.score: score_line(state, lang)}
        record = run.records[state.step]
        if state.phase == "guess":
            title = t(TITLE[state.kind], lang, step=record.step + 1)
            return {self.tree: draw_tree(TreeDrawing(record.root, hidden(record)), lang, title, show_probs=False),
                    **self.fields(state.kind, record, lang, interactive=True),
                    self.score: t(ASK[state.kind], lang) if record.nodes else t("predict.nothing", lang)}
        if state.check is not None:  # a reject or count question was answered
            check = state.check
            lines = [*verdict_lines(record, check, lang, run.request.max_new_tokens),
                     kind_score(state, check.kind, lang)]
            return {self.tree: tree_figure(record, lang), **self.fields(check.kind, record, lang, check=check),
                    self.score: "<br>".join([*lines, scores_line(state, lang)])}
        kept = [n.text for n in record.nodes if n.status == "accepted"]
        lines = [t("predict.kept", lang, kept=" ".join(kept) or "∅"), score_line(state, lang)]
        if unreached := len(record.nodes) - len(judged(record)):
            lines.append(t("predict.unjudged", lang, n=unreached))
        if state.reject.total or state.count.total:
            lines.append(scores_line(state, lang))
        return {self.tree: tree_figure(record, lang),
                **self.fields("keep", record, lang, picked=sorted(state.picked)),
                self.score: "<br>".join(lines)}

    def fields(self, kind: str, record: StepRecord | None, lang: str, *, interactive: bool = False, picked=None,
               check: Check | None = None) -> dict:
        """The three answer fields: the one for ``kind`` shown, with ``record``'s choices (none without a
        step), editable while guessing, else holding the answer given."""
        nodes = drafted(record) if record is not None else []
        reject = [(label, str(node_id)) for label, node_id in nodes] + ([(t("predict.none", lang), "none")]
                                                                        if nodes else [])
        count = [(str(n), str(n)) for n in count_choices(record)] if record is not None and record.nodes else []
        given = None if check is None or check.guess is None else ("none" if check.guess == NONE else str(check.guess))
        return {self.choices: gr.update(choices=nodes, value=picked or [], interactive=interactive,
                                        visible=kind == "keep"),
                self.reject: gr.update(choices=reject, value=given if kind == "reject" else None,
                                       interactive=interactive, visible=kind == "reject"),
                self.count: gr.update(choices=count, value=given if kind == "count" else None,
                                      interactive=interactive, visible=kind == "count")}


def token(record: StepRecord, node_id: int) -> str:
    """A drafted node as the answer fields name it ("3: 中"), safe in Markdown."""
    return markdown_text(f"{node_id + 1}: {visible(record.nodes[node_id].text)}")


def texts(tokens) -> str:
    return " ".join(markdown_text(visible(x.text)) for x in tokens) or "∅"


def verdict_lines(record: StepRecord, check: Check, lang: str, budget: int) -> list[str]:
    """Right or wrong (or why it is not scored), then what the step did that decides it; ``budget``: the
    run's max new tokens."""
    if not check.scored:
        head = t("predict.unscored_" + check.unscored, lang)
    elif check.right:
        head = t("predict.right", lang)
    else:
        guess = t("predict.none", lang) if check.guess == NONE else (
            token(record, check.guess) if check.kind == "reject" else str(check.guess))
        head = t("predict.wrong", lang, guess=guess)
    if not record.nodes:
        return [head]
    if check.kind == "reject":
        return [head, *reject_why(record, check, lang)]
    return [head, count_why(record, lang, budget)]


def reject_why(record: StepRecord, check: Check, lang: str) -> list[str]:
    stop = stop_of(record)
    kept = texts(record.nodes[i] for i in stop.kept)
    nxt = markdown_text(visible(record.next.text))
    if not stop.refused:
        lines = [t("predict.kept_all", lang, kept=kept, next=nxt)]
    else:
        first = token(record, stop.first)
        lines = [t("predict.stopped", lang, kept=kept, first=first, next=nxt) if stop.kept
                 else t("predict.stopped_at_root", lang, first=first, next=nxt)]
        if len(stop.refused) > 1:
            lines.append(t("predict.siblings", lang, others=", ".join(token(record, i) for i in stop.refused[1:])))
    guess = check.guess
    if check.scored and not check.right and guess != NONE:
        status = record.nodes[guess].status
        if status == "not_reached":
            lines.append(t("predict.picked_unreached", lang, guess=token(record, guess)))
        elif status == "rejected" and guess not in stop.refused:
            lines.append(t("predict.picked_sibling", lang, guess=token(record, guess)))
    return lines


def count_why(record: StepRecord, lang: str, budget: int) -> str:
    """How the step's count is made: the kept drafted tokens and the target's own, or where the run ended."""
    written, full = len(record.emitted), record.accepted_length + 1
    if written < full:
        return t("predict.count_cut", lang, n=written, tokens=texts(record.emitted), full=full,
                 reason=t("predict.cut_budget" if record.new_tokens_total >= budget else "predict.cut_eos", lang))
    return t("predict.count_is", lang, n=written, kept=record.accepted_length,
             next=markdown_text(visible(record.next.text)), kind=t(f"kind.{record.next.kind}", lang))


def kind_score(state: Predict, kind: str, lang: str) -> str:
    score = getattr(state, kind)
    return t("predict.kind_score", lang, right=score.right, total=score.total) if score.total else ""


def scores_line(state: Predict, lang: str) -> str:
    """Every question's score over the run ("–" for one not asked yet)."""
    shown = {kind: f"{s.right}/{s.total}" if (s := getattr(state, "score" if kind == "keep" else kind)).total else "–"
             for kind in KINDS}
    return t("predict.scores", lang, **shown)


def score_line(state: Predict, lang: str) -> str:
    if not state.score.total:
        return ""
    return t("predict.score", lang, right=state.last.right, total=state.last.total, all_right=state.score.right,
             all_total=state.score.total)


def question_texts(result: dict | None, lang: str) -> tuple[str, str]:
    """The batch-size question and its measured answer ("" when no sweep is shipped for the preset). The
    answer says where it was measured, apart from the article's GPU figure the lesson quotes."""
    q = batch_question(result)
    if q is None:
        return "", ""
    answer = t("predict.batch_yes" if q.pays else "predict.batch_no", lang, drafter=q.drafter, batch=q.batch,
               speedup=q.speedup, source=q.source, device=q.device)
    return t("predict.batch_q", lang, drafter=q.drafter, batch=q.batch), f"{answer}\n\n{t('predict.article', lang)}"


def guess_radio(labels: Labels, visible: bool) -> gr.Radio:
    """The batch question's yes / no, whose words follow the language toggle."""
    answers = [("predict.yes", "yes"), ("predict.no", "no")]
    radio = gr.Radio([(labels.text(key), value) for key, value in answers], label=labels.text("predict.your_guess"),
                     elem_id="predict-batch-guess", visible=visible)
    return labels(radio, label="predict.your_guess", choices=answers)


def kind_radio(labels: Labels) -> gr.Radio:
    """Which question the class answers, in the page's language."""
    radio = gr.Radio([(labels.text(key), value) for key, value in KIND_KEYS], value="keep",
                     label=labels.text("predict.kind"), elem_id="predict-kind")
    return labels(radio, label="predict.kind", choices=KIND_KEYS)


def parse_guess(kind: str, value, record, lang: str) -> int | None:
    """The reject or count answer as the page sends it ("none", a node id, a count; None: no answer)."""
    if value in (None, "", []):
        return None
    options = (["none", *(str(n.id) for n in record.nodes)] if kind == "reject"
               else [str(n) for n in count_choices(record)])
    if str(value) not in options:
        raise UserError(t("predict.bad_answer", lang, value=value, options=", ".join(options)))
    return NONE if value == "none" else int(value)


def step_handlers(view: PredictView, state: gr.State, gate: RunGate, live_request) -> dict:
    """The step questions' handlers: next (draft and verify a step of the predict run, ask), reveal (check the
    answer to the asked question) and kind (ask another question); errors go to the score line."""

    @guarded(view.score)
    def on_next(lang_value, session, prompt_value, preset_value, drafter_value, kind_value="keep"):
        session = ensure(session)
        mine = session.of(ClassroomState)
        kind_value = choice(kind_value, KINDS, "predict.kind", lang_value)
        if mine.predict.phase != "idle" and mine.tell_finished(mine.predict_run):  # ask before discarding it
            return {state: session, view.score: t("predict.finished", lang_value)}
        with gate.slot(session, lang_value):
            request = live_request(lang_value, prompt_value, preset_value, drafter_value)
            if mine.predict_run is None or mine.predict_run.done or mine.predict.phase == "idle":  # idle: after Reset
                if mine.predict_run is not None:
                    mine.predict_run.stop()
                mine.predict_run = Run(request)
            record = mine.predict_run.step()
        if record is None:
            return {state: session, view.score: t("predict.done", lang_value)}
        mine.predict = mine.predict.next_step(record.step, kind_value)
        return {state: session, **view.render(session, lang_value)}

    @guarded(view.score)
    def on_reveal(lang_value, session, picked, kind_value="keep", rejected=None, counted=None):
        session = ensure(session)
        mine = session.of(ClassroomState)
        kind_value = choice(kind_value, KINDS, "predict.kind", lang_value)
        if mine.predict_run is not None and mine.predict.phase == "guess":
            record = mine.predict_run.records[mine.predict.step]
            asked = mine.predict.ask(kind_value)
            if kind_value == "keep":
                mine.predict = asked.reveal(record, picked or [])
            else:
                guess = parse_guess(kind_value, rejected if kind_value == "reject" else counted, record, lang_value)
                mine.predict = asked.answer(record, guess)
        return {state: session, **view.render(session, lang_value)}

    @guarded(view.score)
    def on_kind(lang_value, session, kind_value):
        """Another question: asked of the step being guessed, or of the next one once it is revealed."""
        session = ensure(session)
        mine = session.of(ClassroomState)
        mine.predict = mine.predict.ask(choice(kind_value, KINDS, "predict.kind", lang_value))
        if mine.predict.phase == "revealed":  # the revealed step keeps its verdict and answer on screen
            return {state: session}
        return {state: session, **view.render_step(mine, lang_value)}

    return {"next": on_next, "reveal": on_reveal, "kind": on_kind}


def build(page: Page, settings: list, live_request, sweep: Path | None) -> PredictView:
    """``settings``: the live part's prompt, preset and drafter; ``live_request(lang, *settings)`` builds its
    request; ``sweep``: the preset's shipped batch sweep (a bench result file) for the batch question."""
    labels, state, lang, gate = page.labels, page.state, page.lang, page.gate
    result = json.loads(sweep.read_text(encoding="utf-8")) if sweep is not None and sweep.is_file() else None
    with gr.Column(elem_id="lesson-predict"):
        labels.make(gr.Markdown, text="predict.intro", elem_id="lesson-predict-intro")
        with gr.Row():
            next_btn = labels.make(gr.Button, text="btn.predict_next", variant="primary", elem_id="predict-next")
            reveal_btn = labels.make(gr.Button, text="btn.predict_reveal", elem_id="predict-reveal")
        kind = kind_radio(labels)
        choices = labels.make(gr.CheckboxGroup, choices=[], label="predict.choices", elem_id="predict-choices")
        reject = labels.make(gr.Radio, choices=[], label="predict.reject_label", elem_id="predict-reject",
                             visible=False)
        count = labels.make(gr.Radio, choices=[], label="predict.count_label", elem_id="predict-count", visible=False)
        score = gr.Markdown(elem_id="predict-score")
        tree = gr.Plot(show_label=False, elem_id="predict-tree")
        question_text, _ = question_texts(result, labels.lang)
        question = gr.Markdown(question_text, elem_id="predict-batch-q")
        guess = guess_radio(labels, visible=bool(question_text))
        answer = gr.Markdown(elem_id="predict-batch-a")
    view = PredictView(tree, choices, score, question, answer, reject, count, result)
    handle = step_handlers(view, state, gate, live_request)

    @guarded(answer)
    def on_guess(lang_value, session, choice):
        session = ensure(session)
        mine = session.of(ClassroomState)
        mine.batch_answered = bool(choice)
        return {state: session, **view.render_batch(mine, lang_value)}

    outputs = [state, *view.outputs]
    next_btn.click(handle["next"], [lang, state, *settings, kind], outputs, api_name="predict_next",
                   concurrency_id="decode", concurrency_limit=gate.handlers)
    reveal_btn.click(handle["reveal"], [lang, state, choices, kind, reject, count], outputs, api_name="predict_reveal")
    kind.change(handle["kind"], [lang, state, kind], [state, tree, choices, score, reject, count],
                api_visibility="private")
    guess.change(on_guess, [lang, state, guess], [state, question, answer], api_visibility="private")
    return view
