"""The chat-style training prompts (core.train.chat_prompts) and the chat-style held-out set
(assets/prompts/chat.txt): tens of thousands of distinct prompts, drawn reproducibly, and a
held-out set of 16 Chinese and 16 English prompts that none of them is, nor mentions a topic of."""
import re

import torch

from core.models.prompts import CHAT_PROMPTS, load_prompts
from core.studies.bench import language
from core.train import chat_prompts


def test_the_prompt_space_is_wide_and_draws_are_reproducible_members_of_it():
    space = {prompt for _, prompt in chat_prompts.all_prompts()}
    assert chat_prompts.prompt_count() == len(space) > 30_000
    families = {name for name, _ in chat_prompts.all_prompts()}
    assert {"dialogue-en", "dialogue-zh", "list-en", "list-zh", "code-en", "code-zh", "code-open"} <= families
    draws = [chat_prompts.chat_prompt(torch.Generator().manual_seed(seed)) for seed in range(200)]
    assert draws == [chat_prompts.chat_prompt(torch.Generator().manual_seed(seed)) for seed in range(200)]
    assert all(prompt in space for _, prompt in draws)
    assert {lang for lang, _ in draws} == {"en", "zh", "code"} and len({p for _, p in draws}) > 190
    assert not any(re.search(r"\{\w+(\[\d\])?\}", p) for p in space)  # every slot filled


def test_the_chat_heldout_set_is_disjoint_from_the_training_prompts():
    heldout = load_prompts("chat")
    assert load_prompts(CHAT_PROMPTS) == heldout
    assert [language(p) for p in heldout] == ["zh"] * 16 + ["en"] * 16
    space = {prompt for _, prompt in chat_prompts.all_prompts()}
    assert not set(heldout) & space
    for prompt in heldout:  # nor does it name a training topic, list subject or coding task
        for topic in chat_prompts.TOPICS["zh"]:
            assert topic not in prompt, (prompt, topic)
        for topic in chat_prompts.TOPICS["en"]:
            assert not re.search(rf"\b{re.escape(topic)}\b", prompt, re.IGNORECASE), (prompt, topic)
