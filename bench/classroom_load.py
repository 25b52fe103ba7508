"""A class on one server: N students drive one app at once through its API (``gradio_client``), as a
classroom does, and the server's latency, errors, memory and what its page said about its own timings
are reported.

    python bench/classroom_load.py --preset tiny --students 30
    python bench/classroom_load.py --preset gemma-270m --students 8

Each student opens the Classroom, makes ``--guesses`` guesses in predict mode (``/predict_next`` then
``/predict_reveal``) and steps the live part ``--steps`` times under the goodput controller (``/step``,
eagle3 with ``auto``, whose why-line states its timing claims); ``--leave`` of them leave after their
guesses. Printed as JSON: p50/p95 seconds per action, errors and refusals ("the server is busy"),
the server's RSS over the run and after ``--ttl`` (the app runs with ``--session-ttl``), and the
why-lines' numbers: expected gains against expected tokens, realised gains against tokens, and how
many steps the page labelled disturbed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = re.compile(r"Expected: ([\d.]+) tokens from this step, ([\d.]+)× plain")
MEASURED = re.compile(r"Measured: (\d+) tokens? in [\d.]+ ms .*?so this step ran at ([\d.]+|—)× plain")
DISTURBED = "timing was disturbed"


def start_app(preset: str, ttl_s: int, max_sessions: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--preset", preset, "--port", str(port),
                             "--session-ttl", str(ttl_s), "--max-sessions", str(max_sessions)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"})
    url = f"http://127.0.0.1:{port}/"
    for _ in range(360):
        try:
            with urllib.request.urlopen(url, timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"the app did not answer on {url}")


class Student(threading.Thread):
    def __init__(self, url: str, preset: str, guesses: int, steps: int, leaves: bool, seed: int, log: list):
        super().__init__(daemon=True)
        self.url, self.preset, self.guesses, self.steps, self.leaves = url, preset, guesses, steps, leaves
        self.random, self.log = random.Random(seed), log

    def call(self, client: Client, action: str, *args, api_name: str):
        start = time.perf_counter()
        try:
            out = client.predict(*args, api_name=api_name)
            self.log.append((action, time.perf_counter() - start, "", out))
        except Exception as error:  # a refusal or a failure: what the student saw
            self.log.append((action, time.perf_counter() - start, str(error)[:200], None))

    def run(self) -> None:
        client = Client(self.url, verbose=False)
        prompt = "It is a truth universally acknowledged, that"
        self.call(client, "open", "en", api_name="/lesson_next")
        for _ in range(self.guesses):
            self.call(client, "guess", "en", prompt, self.preset, "draft" if self.preset == "tiny" else "eagle3",
                      api_name="/predict_next")
            time.sleep(self.random.uniform(0.5, 2.0))  # thinking
            self.call(client, "reveal", "en", [], api_name="/predict_reveal")
        if self.leaves:
            return
        for _ in range(self.steps):
            self.call(client, "step", "en", prompt, self.preset, "eagle3", 4, 1, 0, 0, 24, 16, "", "", True,
                      api_name="/step")
            time.sleep(self.random.uniform(1.0, 3.0))


def claims(log: list) -> dict:
    """What the why-lines of the Steps said (Step by step's sentence is its 4th output)."""
    expected = measured = disturbed = lines = 0
    worst_expected, worst_realised = 0.0, 0.0
    for action, _, error, out in log:
        if action != "step" or error or out is None:
            continue
        sentence = str(out[3])
        if "sdl-why" not in sentence:
            continue
        lines += 1
        disturbed += DISTURBED in sentence
        if m := EXPECTED.search(sentence):
            tokens, gain = float(m.group(1)), float(m.group(2))
            worst_expected = max(worst_expected, gain / tokens)
            expected += gain > tokens + 1e-6
        if (m := MEASURED.search(sentence)) and m.group(2) != "—":
            ratio = float(m.group(2)) / int(m.group(1))
            worst_realised = max(worst_realised, ratio)
            measured += ratio > 1.25
    return {"why_lines": lines, "expected_gain_above_tokens": expected, "worst_expected_over_tokens":
            round(worst_expected, 2), "realised_above_1.25x_tokens": measured,
            "worst_realised_over_tokens": round(worst_realised, 2), "labelled_disturbed": disturbed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--guesses", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--leave", type=float, default=0.2, help="share of students who leave after guessing")
    parser.add_argument("--ttl", type=int, default=30, help="the app's --session-ttl, waited for at the end")
    args = parser.parse_args()
    proc, url = start_app(args.preset, args.ttl, max(200, 2 * args.students))
    server = psutil.Process(proc.pid)
    try:
        Client(url, verbose=False).predict("en", api_name="/lesson_next")  # the page built once
        rss = [(0.0, server.memory_info().rss / 2**20)]
        log: list = []
        leaving = set(random.Random(0).sample(range(args.students), round(args.leave * args.students)))
        students = [Student(url, args.preset, args.guesses, args.steps, i in leaving, i, log)
                    for i in range(args.students)]
        start = time.monotonic()
        for student in students:
            student.start()
            time.sleep(0.2)  # a class arrives over a few seconds
        while any(s.is_alive() for s in students):
            time.sleep(2)
            rss.append((round(time.monotonic() - start, 1), round(server.memory_info().rss / 2**20)))
        took = time.monotonic() - start
        time.sleep(args.ttl + 10)  # the sessions' time-to-live and a sweep
        after_ttl = round(server.memory_info().rss / 2**20)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    by_action: dict = {}
    for action, seconds, error, _ in log:
        entry = by_action.setdefault(action, {"calls": 0, "seconds": [], "refused": 0, "errors": []})
        entry["calls"] += 1
        if not error:
            entry["seconds"].append(seconds)
        elif "busy" in error or "queue" in error.lower():
            entry["refused"] += 1
        else:
            entry["errors"].append(error)
    report = {
        "preset": args.preset, "students": args.students, "cores": os.cpu_count(), "seconds": round(took, 1),
        "actions": {a: {"calls": e["calls"], "refused": e["refused"], "errors": len(e["errors"]),
                        "first_error": e["errors"][0] if e["errors"] else None,
                        "p50_s": round(statistics.median(e["seconds"]), 2) if e["seconds"] else None,
                        "p95_s": round(statistics.quantiles(e["seconds"], n=20)[18], 2)
                        if len(e["seconds"]) > 1 else None} for a, e in by_action.items()},
        "rss_mb": {"start": round(rss[0][1]), "peak": max(m for _, m in rss), "end_of_class": rss[-1][1],
                   "after_ttl": after_ttl},
        "page_said": claims(log),
    }
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
