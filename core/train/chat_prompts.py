"""Chat-style prompts for the target to continue: the kinds of text people type into the app.

Questions, instructions and code openings, in Chinese and English, made from short templates
and topics written for this purpose (none is a held-out evaluation prompt). ``chat_prompt``
draws one with a seeded generator, so a data plan that names (template, topic) is reproducible.
"""
from __future__ import annotations

import torch

TEMPLATES = {
    "en": (
        "What is {topic}?",
        "Can you explain {topic} in simple words?",
        "Why is {topic} important?",
        "Write a short paragraph about {topic}.",
        "Give me three facts about {topic}.",
        "How do I get started with {topic}?",
        "Explain {topic} to a ten-year-old.",
        "Summarize the main ideas of {topic}.",
        "What are the pros and cons of {topic}?",
        "Write a short story about {topic}.",
        "List five questions a student might ask about {topic}.",
        "Write an email to a friend about {topic}.",
        "Q: What do you know about {topic}?\nA:",
        "Tell me something surprising about {topic}.",
        "Compare {topic} with something from everyday life.",
        "Write a haiku about {topic}.",
        "I am learning about {topic}. Where should I begin?",
        "Translate into Chinese: I would like to learn more about {topic}.",
    ),
    "zh": (
        "什么是{topic}？",
        "请用简单的话解释一下{topic}。",
        "为什么{topic}很重要？",
        "写一段关于{topic}的短文。",
        "请列出关于{topic}的三个事实。",
        "我该如何开始学习{topic}？",
        "给小学生讲讲{topic}。",
        "总结一下{topic}的要点。",
        "{topic}有哪些优点和缺点？",
        "写一个关于{topic}的小故事。",
        "问：你了解{topic}吗？\n答：",
        "请给朋友写一封信，谈谈{topic}。",
        "关于{topic}，有什么有趣的知识？",
        "用一首短诗描写{topic}。",
        "我最近在学{topic}，有什么建议吗？",
        "把这句话翻译成英文：我想多了解一些{topic}。",
    ),
}
TOPICS = {
    "en": (
        "photosynthesis", "the water cycle", "black holes", "the French Revolution", "machine learning",
        "compound interest", "the human heart", "climate change", "the printing press", "volcanoes",
        "healthy sleep", "the Silk Road", "prime numbers", "electric cars", "honey bees", "the Moon landing",
        "learning a new language", "the internet", "recycling", "the Great Wall of China", "jazz music",
        "the immune system", "renewable energy", "gravity", "the Roman Empire", "coffee", "earthquakes",
        "public speaking", "chess", "saving money", "the solar system", "vaccines", "tea ceremonies",
        "time management", "rainforests", "the stock market", "bread baking", "dinosaurs", "friendship",
        "speculative decoding",
    ),
    "zh": (
        "光合作用", "水循环", "黑洞", "人工智能", "长城", "中秋节", "春节", "太阳系", "熊猫", "茶文化",
        "唐诗", "丝绸之路", "火山", "健康饮食", "睡眠", "地震", "环境保护", "电动汽车", "互联网", "书法",
        "京剧", "围棋", "学习英语", "时间管理", "理财", "中医", "四大发明", "气候变化", "月亮", "春天",
        "友谊", "旅行", "编程", "数学", "历史", "音乐", "运动", "读书", "家乡", "大熊猫保护",
    ),
}
CODE_OPENINGS = (
    "def fibonacci(n):\n",
    "def is_prime(n):\n    \"\"\"Return True if n is a prime number.\"\"\"\n",
    "# Python: read a CSV file and print the average of each column\nimport csv\n\n",
    "import numpy as np\n\n\ndef normalize(x):\n",
    "class Stack:\n    def __init__(self):\n",
    "def binary_search(items, target):\n",
    "# 计算列表中所有数字的和\ndef total(numbers):\n",
    "# 读取文件并统计每个单词出现的次数\nfrom collections import Counter\n\n",
    "function debounce(fn, delay) {\n",
    "SELECT name, COUNT(*) AS orders\nFROM customers\n",
    "#include <stdio.h>\n\nint main(void) {\n",
    "for i in range(10):\n",
    "Write a Python function that reverses a string.\n\n```python\n",
    "用 Python 写一个函数，判断一个字符串是不是回文。\n\n```python\n",
    "$ git status\n",
    "def quicksort(arr):\n",
)
KINDS = ("en", "zh", "code")
KIND_WEIGHTS = (0.4, 0.4, 0.2)


def prompt_count() -> int:
    """How many distinct prompts ``chat_prompt`` can return."""
    return sum(len(TEMPLATES[lang]) * len(TOPICS[lang]) for lang in ("en", "zh")) + len(CODE_OPENINGS)


def chat_prompt(generator: torch.Generator) -> tuple[str, str]:
    """(language, prompt): a question or instruction in English or Chinese, or a code opening."""
    kind = KINDS[int(torch.multinomial(torch.tensor(KIND_WEIGHTS), 1, generator=generator))]
    if kind == "code":
        return kind, CODE_OPENINGS[int(torch.randint(len(CODE_OPENINGS), (1,), generator=generator))]
    template = TEMPLATES[kind][int(torch.randint(len(TEMPLATES[kind]), (1,), generator=generator))]
    topic = TOPICS[kind][int(torch.randint(len(TOPICS[kind]), (1,), generator=generator))]
    return kind, template.format(topic=topic)
