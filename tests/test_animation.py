"""The animated step (app/figures/animation.py): its frames are the recorded step's events, in the order the
engine did them -- draft, verify, accept, the target's own token, the KV slots freed -- each drawn from the
StepRecord of a real run on tiny and captioned with its numbers, in Chinese and English."""
from __future__ import annotations

import html
import re

import pytest
from app_server import TINY_MISSING, TINY_READY

from app.figures.animation import CAPTION_CELLS, WRITTEN, _wrap, animation_figure, animation_frames
from app.palette import COLORS, KV_COLORS, visible
from core.api.decoding import build_decoder
from core.api.request import DecodeRequest

pytestmark = pytest.mark.skipif(not TINY_READY, reason=TINY_MISSING)

NODES, NEXT, KV = 3, 4, 5  # trace indices in every frame: the drafted nodes, the target's token, the KV cells


@pytest.fixture(scope="module")
def runs():
    """Inspected runs on tiny, as the page makes them: a chain, a tree, a sampled chain (resamples), plain
    decoding, and a chain over 4-slot KV blocks (so that refused slots empty whole blocks)."""
    requests = {
        "chain": DecodeRequest.of("我爱", drafter="draft", k=4, max_new_tokens=16),
        "tree": DecodeRequest.of("我爱", drafter="draft", k=2, tree="2x2", max_new_tokens=16),
        "sampled": DecodeRequest.of("我爱", drafter="draft", k=4, temperature=0.8, seed=1, max_new_tokens=16),
        "none": DecodeRequest.of("我爱", drafter="none", max_new_tokens=4),
        "blocks": DecodeRequest.of("我爱", drafter="draft", k=4, tree="2x4", block_size=4, max_new_tokens=12),
    }
    out = {}
    for name, request in requests.items():
        decoder, prompt_ids = build_decoder(request, inspect=True)
        out[name] = list(decoder.steps(prompt_ids))
    return out


def _expected_names(record) -> list[str]:
    resampled = record.next.kind == "correction" and record.inspect.rejection.temperature > 0
    return ["draft", "verify", *(["accept"] if record.nodes else []),
            "resample" if resampled else record.next.kind, "kv"]


def _kv_cells(record) -> list[str]:
    """The recorded slot states of the blocks the step wrote to or freed, block by block."""
    freed = {str(b) for b in record.kv.freed_blocks}
    grid = record.kv.slot_grid
    return [c for b in sorted(grid, key=int) if b in freed or set(grid[b]) & {"W", "F"} for c in grid[b]]


def _caption(frame) -> str:
    """A frame's caption as one line (the breaks taken out: the space a line broke at is gone)."""
    return html.unescape(frame["layout"]["annotations"][0]["text"].replace("<br>", ""))


def _says(caption: str, number: int) -> bool:
    """``number`` written in ``caption`` as a number of its own (not a digit of another)."""
    return re.search(rf"(?<![\d.]){number}(?![\d.])", caption) is not None


def _all_records(runs):
    return [(name, record) for name, records in runs.items() for record in records]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_each_frame_is_the_recorded_event_in_order(runs, lang):
    seen = set()
    for name, record in _all_records(runs):
        frames = animation_frames(animation_figure(record, lang))
        names = [f["name"] for f in frames]
        assert names == _expected_names(record), (name, record.step)
        seen.add(names[-2])
        by_name = dict(zip(names, frames))
        ids = [n.id for n in record.nodes]
        cells = _kv_cells(record)

        # draft: every drafted node, by id, with its token, none judged yet; no KV slot written yet
        draft = by_name["draft"]["data"]
        assert list(draft[NODES]["customdata"]) == ids
        assert [h.split(" · ")[0] for h in draft[NODES]["hovertext"]] == [f"“{html.escape(visible(n.text))}”"
                                                                          for n in record.nodes]
        assert set(draft[NODES]["marker"]["color"]) <= {COLORS["proposed"]}
        assert not draft[NEXT]["x"]
        assert draft[KV]["customdata"] == ["." if c in "WF" else c for c in cells]

        # verify: the one forward wrote root + drafted nodes, slots_written of them
        verify = by_name["verify"]["data"]
        assert verify[KV]["marker"]["color"].count(WRITTEN) == record.kv.slots_written == len(record.nodes) + 1
        assert verify[NODES]["marker"]["line"]["color"] == COLORS["target"]

        # accept: each node in the colour of its recorded fate; the kept slots turn green
        if record.nodes:
            accept = by_name["accept"]["data"]
            assert accept[NODES]["marker"]["color"] == [COLORS[n.status] for n in record.nodes]
            assert accept[NODES]["marker"]["color"].count(COLORS["accepted"]) == record.accepted_length
            assert accept[KV]["customdata"] == ["written" if c == "F" else c for c in cells]

        # the target's token: the recorded one, in its kind's colour, one past the accepted path
        target = frames[-2]["data"][NEXT]
        shown = visible(record.next.text)
        assert target["text"] == [html.escape(shown if len(shown) <= 3 else shown[:2] + "…")]
        assert target["marker"]["color"] == COLORS[record.next.kind]
        assert target["x"] == [record.accepted_length + 1]

        # kv: the refused slots freed (red), as the record's slot grid says
        kv = by_name["kv"]["data"][KV]
        assert kv["customdata"] == cells
        assert kv["marker"]["color"].count(KV_COLORS["F"]) == record.kv.slots_freed

        # the captions carry the step's own numbers
        prefixes = [f"{i + 1}/{len(frames)} · " for i in range(len(frames))]
        assert [_caption(f)[:len(p)] for f, p in zip(frames, prefixes)] == prefixes
        captions = [_caption(f)[len(p):] for f, p in zip(frames, prefixes)]
        if record.nodes:
            assert _says(captions[0], len(record.nodes))
            assert _says(captions[1], len(record.nodes) + 1)  # positions in the one verify forward
            if record.accepted_length:
                assert _says(captions[2], record.accepted_length)
        assert f"“{visible(record.next.text)}”" in captions[-2] and _says(captions[-2], len(record.emitted))
        freed = captions[-1]
        assert f"{record.kv.blocks_before}→{record.kv.blocks_after}" in freed.replace(" ", "")  # a line may break at a space
        assert _says(freed, record.kv.slots_freed) if record.kv.slots_freed else _says(freed, record.kv.slots_written)
        for block in record.kv.freed_blocks:
            assert _says(freed, block)
    # the runs reach every kind of event: a correction, a resample, a bonus, a plain target token, a freed block
    assert {"correction", "resample", "bonus", "target"} <= seen
    assert any(r.kv.freed_blocks for _, r in _all_records(runs))


def test_play_plays_the_slider_frames_in_order_and_moves_the_slider(runs):
    record = runs["chain"][0]
    fig = animation_figure(record, "en").to_plotly_json()
    play, pause = fig["layout"]["updatemenus"][0]["buttons"]
    assert play["method"] == "animate" and play["args"][0] == animation_frames(fig)
    assert pause["args"][0] == [None]
    assert [f["layout"]["sliders"][0]["active"] for f in play["args"][0]] == list(range(len(play["args"][0])))
    assert fig["layout"]["annotations"] == play["args"][0][0]["layout"]["annotations"]  # it opens on the draft


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_captions_fit_a_phone(runs, lang):
    """No caption line is wider than the figure's narrow width; nothing sets a fixed width."""
    import unicodedata

    for _, record in _all_records(runs):
        fig = animation_figure(record, lang)
        assert fig.layout.width is None
        for frame in animation_frames(fig):
            for line in frame["layout"]["annotations"][0]["text"].split("<br>"):
                line = html.unescape(line)
                cells = sum(2 if unicodedata.east_asian_width(ch) in "WFA" else 1 for ch in line)
                assert cells <= CAPTION_CELLS + 6, line  # a quoted token is never split: a little over at most


def test_wrapping_keeps_a_quoted_token_and_its_punctuation_whole():
    text = "连成一条链：“，” “一” “山” “山”。目标模型还没看过它们（灰蓝）。"
    lines = _wrap(text, 20).split("<br>")
    assert len(lines) > 1 and "".join(lines).replace(" ", "") == text.replace(" ", "")
    assert not any(line.startswith(("，", "。", "”")) or line.endswith(("（", "“")) for line in lines)
    for width in range(6, 30):  # a bracket stays with the quoted token it opens or closes, wherever the line ends
        for line in _wrap("目标模型认可前 1 个（“↵”），到“天”不认可", width).split("<br>"):
            assert not line.endswith(("（", "“")) and not line.startswith(("）", "，", "”")), (width, line)
    assert all(line.count("“") == line.count("”") for line in lines)
    assert _wrap("the request&#x27;s blocks", 12).split("<br>") == ["the", "request&#x27;s", "blocks"]
