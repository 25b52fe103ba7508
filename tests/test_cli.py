"""The command line contract: one JSON object, documented fields, clear errors without tracebacks."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {
    "text", "tokens", "new_tokens", "target_forwards", "draft_tokens_proposed", "draft_tokens_accepted",
    "acceptance_rate", "mean_accepted_tokens", "per_position_acceptance", "wall_s", "tokens_per_s",
    "target", "draft", "kv",
}
KV_FIELDS = {"block_size", "blocks_total", "peak_blocks_in_use", "blocks_freed", "slots_freed", "blocks_in_use_after"}


def cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "core", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def test_generate_json_has_every_field_and_matches_the_baseline(tmp_path):
    trace = tmp_path / "run.jsonl"
    proc = cli("generate", "--preset", "tiny", "--drafter", "draft", "--k", "4", "--prompt", "我爱",
               "--max-new-tokens", "48", "--temperature", "0", "--seed", "0", "--trace", str(trace),
               "--check", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # exactly one JSON object on stdout
    assert REQUIRED <= data.keys() and KV_FIELDS <= data["kv"].keys()
    assert data["baseline_match"] is True
    assert data["new_tokens"] == len(data["tokens"])
    assert data["mean_accepted_tokens"] == pytest.approx(data["new_tokens"] / data["target_forwards"])
    assert data["acceptance_rate"] == pytest.approx(data["draft_tokens_accepted"] / data["draft_tokens_proposed"])
    assert data["kv"]["blocks_in_use_after"] == 0
    assert data["target"].endswith("target") and data["draft"].endswith("draft")
    assert len(data["per_position_acceptance"]) == 4

    from core import read_trace

    loaded = read_trace(trace)
    assert loaded.header["drafter"] == "draft"
    assert len(loaded.steps) == data["target_forwards"]
    assert sum(len(s.emitted) for s in loaded.steps) == data["new_tokens"]
    assert loaded.summary["tokens"] == data["tokens"]


def test_tree_and_ngram_and_baseline_from_the_cli(capsys):
    from core.cli import main  # in-process: the test above runs the real process

    for args in (["--drafter", "draft", "--tree", "2x3"], ["--drafter", "ngram"], ["--drafter", "none"],
                 ["--drafter", "eagle3", "--draft-vocab-only"]):  # a drafter's flag, left unset for the others
        code = main(["generate", *args, "--prompt", "one two three one two three one two", "--max-new-tokens",
                     "16", "--check", "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        data = json.loads(out)
        assert data["baseline_match"] is True
        if args[1] == "none":
            assert data["target_forwards"] == data["new_tokens"] and data["draft"] is None


@pytest.mark.parametrize(
    "args,message",
    [
        (["--preset", "nonesuch"], "unknown preset"),
        (["--drafter", "magic"], "unknown drafter"),
        (["--prompt", "   "], "prompt is empty"),
        (["--prompt", "中国" * 600], "context"),
        (["--k", "0"], "between 1 and"),
        (["--k", "1000"], "between 1 and"),
        (["--tree", "9x9"], "between 1 and"),
        (["--tree", "abc"], "WIDTHxDEPTH"),
        (["--temperature", "-1"], "temperature"),
        (["--max-new-tokens", "0"], "max_new_tokens"),
        (["--temperature", "0.5", "--check"], "greedy"),
        (["--device", "tpu"], "device"),
    ],
)
def test_user_mistakes_get_one_clear_message(args, message, capsys):
    """In-process through ``core.cli.main`` (the same parser and error boundary as ``python -m core``;
    the next test pins the real process)."""
    from core.cli import main

    base = [] if "--prompt" in args[::2] else ["--prompt", "我爱"]
    assert main(["generate", *base, *args, "--json"]) == 2
    out, err = capsys.readouterr()
    assert message in err
    assert "Traceback" not in err and err.count("error:") == 1
    assert out == ""


def test_a_mistake_in_a_real_process_is_one_line_without_a_traceback():
    proc = cli("generate", "--prompt", "我爱", "--k", "0", "--json")
    assert proc.returncode == 2
    assert "between 1 and" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_a_draft_with_another_tokenizer_is_refused(tmp_path):
    """A draft whose tokenizer maps tokens to other ids cannot verify against this target."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["zebra yak xylophone"] * 10, trainers.BpeTrainer(vocab_size=60, special_tokens=["<unk>", "</s>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>")
    config = LlamaConfig(vocab_size=len(fast), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=64)
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    fast.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path).get_vocab() != {}
    proc = cli("generate", "--drafter", "draft", "--draft", str(tmp_path), "--prompt", "我爱", "--json")
    assert proc.returncode == 2
    assert "tokenizer differs" in proc.stderr and "Traceback" not in proc.stderr
