"""The classroom's predict mode: the class guesses which drafted tokens the target keeps before the
step is shown, then sees the truth and a running score; and a batch-size question answered by a
measured sweep. Outside the live part's column, so it stays in presentation mode. It steps a run of
its own (``ClassroomState.predict_run``), with the live part's settings."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from ...figures import empty, tree_figure
from ...figures.tree import TreeDrawing, draw_tree
from ...guard import guarded
from ...i18n import t
from ...labels import Labels
from ...runs import Run
from ...session import Session, ensure
from ..page import Page
from .prediction import Predict, batch_question, hidden, judged
from .state import ClassroomState


@dataclass
class PredictView:
    tree: gr.Plot
    choices: gr.CheckboxGroup
    score: gr.Markdown
    question: gr.Markdown
    answer: gr.Markdown
    sweep: dict | None = None  # the preset's shipped batch sweep: it asks and answers the batch question

    @property
    def outputs(self) -> list:
        return [self.tree, self.choices, self.score, self.question, self.answer]

    def render(self, session: Session, lang: str) -> dict:
        mine = session.of(ClassroomState)
        return {**self.render_step(mine, lang), **self.render_batch(mine, lang)}

    def render_batch(self, mine: ClassroomState, lang: str) -> dict:
        """The batch question, and its answer once the class has guessed."""
        question, answer = question_texts(self.sweep, lang)
        return {self.question: question, self.answer: answer if mine.batch_answered else ""}

    def render_step(self, mine: ClassroomState, lang: str) -> dict:
        """The step being guessed (its verdict hidden) or revealed, and the score."""
        state, run = mine.predict, mine.predict_run
        if state.phase == "idle" or run is None or state.step >= len(run.records):
            return {self.tree: empty(t("predict.hint", lang)), self.choices: gr.update(choices=[], value=[]),
                    self.score: score_line(state, lang)}
        record = run.records[state.step]
        if state.phase == "guess":
            title = t("predict.guess_title", lang, step=record.step + 1)
            return {self.tree: draw_tree(TreeDrawing(record.root, hidden(record)), lang, title, show_probs=False),
                    self.choices: gr.update(choices=state.drafted(record), value=[], interactive=True),
                    self.score: t("predict.ask", lang) if record.nodes else t("predict.nothing", lang)}
        kept = [n.text for n in record.nodes if n.status == "accepted"]
        lines = [t("predict.kept", lang, kept=" ".join(kept) or "∅"), score_line(state, lang)]
        if unreached := len(record.nodes) - len(judged(record)):
            lines.append(t("predict.unjudged", lang, n=unreached))
        return {self.tree: tree_figure(record, lang),
                self.choices: gr.update(choices=state.drafted(record), value=sorted(state.picked), interactive=False),
                self.score: "<br>".join(lines)}


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
        choices = labels.make(gr.CheckboxGroup, choices=[], label="predict.choices", elem_id="predict-choices")
        score = gr.Markdown(elem_id="predict-score")
        tree = gr.Plot(show_label=False, elem_id="predict-tree")
        question_text, _ = question_texts(result, labels.lang)
        question = gr.Markdown(question_text, elem_id="predict-batch-q")
        guess = guess_radio(labels, visible=bool(question_text))
        answer = gr.Markdown(elem_id="predict-batch-a")
    view = PredictView(tree, choices, score, question, answer, result)
    status = score

    @guarded(status)
    def on_next(lang_value, session, *values):
        session = ensure(session)
        mine = session.of(ClassroomState)
        if mine.predict.phase != "idle" and mine.tell_finished(mine.predict_run):  # ask before discarding it
            return {state: session, score: t("predict.finished", lang_value)}
        with gate.slot(session, lang_value):
            request = live_request(lang_value, *values)
            if mine.predict_run is None or mine.predict_run.done or mine.predict.phase == "idle":  # idle: after Reset
                if mine.predict_run is not None:
                    mine.predict_run.stop()
                mine.predict_run = Run(request)
            record = mine.predict_run.step()
        if record is None:
            return {state: session, score: t("predict.done", lang_value)}
        mine.predict = mine.predict.next_step(record.step)
        return {state: session, **view.render(session, lang_value)}

    @guarded(status)
    def on_reveal(lang_value, session, picked):
        session = ensure(session)
        mine = session.of(ClassroomState)
        if mine.predict_run is not None and mine.predict.phase == "guess":
            mine.predict = mine.predict.reveal(mine.predict_run.records[mine.predict.step], picked or [])
        return {state: session, **view.render(session, lang_value)}

    @guarded(answer)
    def on_guess(lang_value, session, choice):
        session = ensure(session)
        mine = session.of(ClassroomState)
        mine.batch_answered = bool(choice)
        return {state: session, **view.render_batch(mine, lang_value)}

    outputs = [state, *view.outputs]
    next_btn.click(on_next, [lang, state, *settings], outputs, api_name="predict_next", concurrency_id="decode",
                   concurrency_limit=gate.handlers)
    reveal_btn.click(on_reveal, [lang, state, choices], outputs, api_name="predict_reveal")
    guess.change(on_guess, [lang, state, guess], [state, question, answer], api_visibility="private")
    return view
