"""docs/results.md is generated from docs/benchmarks/*/bench.json and must not drift from them."""
from pathlib import Path

from core.studies import results

ROOT = Path(__file__).resolve().parents[1]


def test_results_md_is_what_the_bench_files_render():
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert committed == results.render(), (
        "docs/results.md differs from the bench.json files: run `python -m core results > docs/results.md`")


def test_every_current_run_has_its_bench_json():
    for _, _, runs in results.CURRENT:
        for run in runs:
            assert (results.BENCHMARKS / run.folder / "bench.json").is_file(), run.folder
    chosen = {run.folder for _, _, runs in results.CURRENT for run in runs}
    for picks in results.SUMMARY.values():
        for _, chat, book in picks:
            assert {f for f in (chat, book) if f} <= chosen
