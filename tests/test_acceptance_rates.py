"""The tiny family speculates well enough to teach with: measured, not assumed."""
from core import generate
from core.prompts import load_prompts


def test_draft_k4_accepts_more_than_one_and_a_half_tokens_per_forward():
    taus = []
    for prompt in load_prompts():
        result = generate(prompt, "tiny", "draft", k=4, max_new_tokens=64)
        assert result.target_forwards < result.new_tokens
        taus.append(result.mean_accepted_tokens)
    assert sum(taus) / len(taus) > 1.5, taus


def test_ngram_on_a_repetitive_prompt_accepts_more_than_two():
    prompt = "one two three four five, one two three four five, one two three four five, one two"
    result = generate(prompt, "tiny", "ngram", k=4, max_new_tokens=48)
    assert result.mean_accepted_tokens > 2, result.to_dict()
