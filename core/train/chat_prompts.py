"""Chat-style prompts for the target to continue: the kinds of text people type into the app.

Questions and instructions, lists, code requests and code openings, and two-turn dialogues, in
Chinese and English. Every template, topic and task here was written for this project (licence:
the project's own); none is a held-out evaluation prompt, and ``assets/prompts/chat.txt`` (the
chat-style held-out set) shares no prompt and no topic with them (tests/test_chat_prompts.py).

A prompt is a template of a *family* with its slots filled (``{topic}``, ``{n}``, ``{lang[0]}``:
a slot value may be a tuple, indexed in the template). :func:`chat_prompt` draws one with a
seeded generator (family by weight, then template and slot values uniformly), so the data plan
that draws them is reproducible; :func:`all_prompts` lists every distinct prompt.
"""
from __future__ import annotations

import itertools
import string
from collections.abc import Iterator
from dataclasses import dataclass

import torch

TOPICS_EN = (
    "photosynthesis", "the water cycle", "black holes", "the French Revolution", "machine learning",
    "compound interest", "the human heart", "climate change", "the printing press", "volcanoes",
    "healthy sleep", "the Silk Road", "prime numbers", "electric cars", "honey bees", "the Moon landing",
    "learning a new language", "the internet", "recycling", "the Great Wall of China", "jazz music",
    "the immune system", "renewable energy", "gravity", "the Roman Empire", "coffee", "earthquakes",
    "public speaking", "chess", "saving money", "the solar system", "vaccines", "tea ceremonies",
    "time management", "rainforests", "the stock market", "bread baking", "dinosaurs", "friendship",
    "speculative decoding", "quantum computing", "the theory of evolution", "democracy", "the Renaissance",
    "ocean tides", "plate tectonics", "the periodic table", "DNA", "antibiotics", "nuclear power",
    "solar panels", "cloud computing", "cryptography", "open source software", "the Olympic Games",
    "meditation", "marathon training", "home gardening", "urban planning", "supply and demand",
    "the Industrial Revolution", "ancient Egypt", "the Cold War", "Shakespeare", "classical music",
    "photography", "origami", "minimalism", "remote work", "job interviews", "personal budgeting",
    "credit scores", "the placebo effect", "dreams", "memory", "habits", "procrastination",
    "artificial intelligence", "robotics", "self-driving cars", "3D printing", "the metric system",
    "the Fibonacci sequence", "probability", "statistics", "calculus", "linear algebra", "databases",
    "computer networks", "operating systems", "version control", "unit testing", "the greenhouse effect",
    "coral reefs", "migrating birds", "wolves", "whales", "mushrooms", "composting", "electricity",
    "magnets", "rainbows", "the speed of light", "the Big Bang", "Mars", "satellites", "the Amazon River",
)
TOPICS_ZH = (
    "光合作用", "水循环", "黑洞", "人工智能", "长城", "中秋节", "春节", "太阳系", "熊猫", "茶文化",
    "唐诗", "丝绸之路", "火山", "健康饮食", "睡眠", "地震", "环境保护", "电动汽车", "互联网", "书法",
    "京剧", "围棋", "学习英语", "时间管理", "理财", "中医", "四大发明", "气候变化", "月亮", "春天",
    "友谊", "旅行", "编程", "数学", "历史", "音乐", "运动", "读书", "家乡", "大熊猫保护",
    "量子计算", "进化论", "元宵节", "端午节", "清明节", "二十四节气", "宋词", "红楼梦", "西游记", "三国演义",
    "孔子", "长江", "黄河", "故宫", "兵马俑", "敦煌", "太极拳", "武术", "剪纸", "瓷器",
    "丝绸", "汉字", "普通话", "成语", "诗歌", "相声", "饺子", "火锅", "川菜", "粤菜",
    "高铁", "移动支付", "外卖", "共享单车", "短视频", "网购", "大学生活", "高考", "考研", "找工作",
    "职场沟通", "减肥", "跑步", "瑜伽", "心理健康", "压力管理", "养宠物", "种花", "摄影", "绘画",
    "钢琴", "天气预报", "台风", "沙漠", "海洋", "森林", "恐龙", "细菌", "疫苗", "基因",
)
# (English verb phrase, Chinese verb phrase, Python name, Python parameters): small coding tasks
TASKS = (
    ("reverses a string", "反转一个字符串", "reverse_string", "text"),
    ("checks whether a number is prime", "判断一个数是不是质数", "is_prime", "n"),
    ("returns the n-th Fibonacci number", "返回第 n 个斐波那契数", "fibonacci", "n"),
    ("sorts a list with quicksort", "用快速排序给列表排序", "quicksort", "items"),
    ("finds the largest number in a list", "找出列表中最大的数", "find_max", "numbers"),
    ("counts the words in a sentence", "统计一句话里有多少个单词", "count_words", "sentence"),
    ("checks whether a string is a palindrome", "判断一个字符串是不是回文", "is_palindrome", "text"),
    ("computes the factorial of n", "计算 n 的阶乘", "factorial", "n"),
    ("converts Celsius to Fahrenheit", "把摄氏度转换成华氏度", "celsius_to_fahrenheit", "celsius"),
    ("removes duplicates from a list while keeping the order", "去掉列表里的重复元素并保持顺序",
     "unique_in_order", "items"),
    ("merges two sorted lists", "合并两个有序列表", "merge_sorted", "left, right"),
    ("does a binary search in a sorted list", "在有序列表中做二分查找", "binary_search", "items, target"),
    ("counts how often each character appears in a string", "统计字符串中每个字符出现的次数",
     "char_counts", "text"),
    ("computes the average of a list of numbers", "计算一组数字的平均值", "average", "numbers"),
    ("checks whether a year is a leap year", "判断某一年是不是闰年", "is_leap_year", "year"),
    ("returns the greatest common divisor of two numbers", "求两个数的最大公约数", "gcd", "a, b"),
    ("flattens a nested list", "把嵌套列表展开成一维列表", "flatten", "nested"),
    ("transposes a matrix", "转置一个矩阵", "transpose", "matrix"),
    ("validates an email address", "检查一个邮箱地址是否合法", "is_valid_email", "address"),
    ("reads a text file and returns its lines", "读取文本文件并返回所有行", "read_lines", "path"),
    ("writes a list of rows to a CSV file", "把若干行数据写入 CSV 文件", "write_csv", "path, rows"),
    ("parses a JSON string into a dictionary", "把 JSON 字符串解析成字典", "parse_json", "text"),
    ("capitalizes the first letter of a string", "把字符串的首字母变成大写", "capitalize_first", "text"),
    ("returns the n largest items of a list", "返回列表中最大的 n 个元素", "top_n", "items, n"),
    ("splits a list into chunks of a given size", "把列表按固定大小切成若干块", "chunk", "items, size"),
    ("rotates a list by k positions", "把列表循环移动 k 位", "rotate", "items, k"),
    ("checks whether two strings are anagrams", "判断两个字符串是否由相同字母组成", "is_anagram", "a, b"),
    ("counts the vowels in a string", "统计字符串中元音字母的个数", "count_vowels", "text"),
    ("converts a decimal number to binary", "把十进制数转换成二进制", "to_binary", "n"),
    ("sums the digits of a number", "计算一个数各位数字之和", "digit_sum", "n"),
    ("generates all permutations of a list", "生成一个列表的全部排列", "permutations", "items"),
    ("finds the second smallest number in a list", "找出列表中第二小的数", "second_smallest", "numbers"),
    ("checks whether parentheses in a string are balanced", "检查字符串里的括号是否配对",
     "balanced", "text"),
    ("returns the common elements of two lists", "返回两个列表的共同元素", "common_items", "a, b"),
    ("computes the distance between two points", "计算两个点之间的距离", "distance", "p, q"),
    ("formats a number of seconds as hours, minutes and seconds", "把秒数格式化成时分秒",
     "format_duration", "seconds"),
    ("finds the longest word in a sentence", "找出句子中最长的单词", "longest_word", "sentence"),
    ("shuffles a list in place", "把列表中的元素随机打乱", "shuffle", "items"),
    ("groups words by their first letter", "按首字母把单词分组", "group_by_initial", "words"),
    ("computes a running total of a list", "计算列表的累加和序列", "running_total", "numbers"),
    ("finds the missing number in a list from 1 to n", "找出 1 到 n 中缺失的那个数", "missing_number",
     "numbers"),
    ("converts a Roman numeral to an integer", "把罗马数字转换成整数", "roman_to_int", "numeral"),
    ("checks whether a number is a power of two", "判断一个数是不是 2 的幂", "is_power_of_two", "n"),
    ("returns the median of a list", "求一个列表的中位数", "median", "numbers"),
    ("removes the whitespace at both ends of every line", "去掉每一行两端的空白", "strip_lines", "lines"),
    ("counts the lines in a file", "统计一个文件有多少行", "count_lines", "path"),
    ("retries a function up to three times", "在函数出错时最多重试三次", "retry", "func"),
    ("caches the results of a slow function", "缓存一个慢函数的计算结果", "memoize", "func"),
    ("measures how long a function takes to run", "测量一个函数运行了多长时间", "timed", "func"),
    ("downloads a web page and returns its title", "下载一个网页并返回它的标题", "page_title", "url"),
)
LANGUAGES = (("Python", "python"), ("JavaScript", "javascript"), ("TypeScript", "typescript"), ("Go", "go"),
             ("Rust", "rust"), ("Java", "java"), ("C++", "cpp"), ("C", "c"))
THINGS_EN = (
    "tips for better sleep", "ways to save money on groceries", "healthy breakfast ideas",
    "books every programmer should read", "things to pack for a beach trip", "questions to ask in a job interview",
    "ways to stay focused while studying", "easy recipes for a busy weeknight", "gift ideas for a ten-year-old",
    "habits of successful people", "fun things to do on a rainy day", "ways to reduce stress at work",
    "common mistakes new drivers make", "houseplants that are hard to kill", "tips for learning to cook",
    "ways to make new friends in a new city", "reasons to learn a second language", "classic movies worth watching",
    "exercises you can do at home", "ways to cut down on plastic", "tips for writing a good resume",
    "signs that you need a break", "board games for a family evening", "ways to improve your handwriting",
    "things to know before adopting a dog", "tips for taking better photos with a phone",
    "snacks that are good for you", "ways to be more productive in the morning", "questions to ask a doctor",
    "ways to keep a conversation going", "tips for a long flight", "things every kitchen needs",
    "mistakes to avoid when investing", "ways to learn math faster", "hobbies you can start for free",
    "tips for remote meetings", "ways to keep kids busy at home", "famous inventions of the last century",
    "ways to practise gratitude", "tips for running your first 5K", "things to check before buying a used car",
    "ways to speed up a slow laptop", "tips for a first date", "good habits for a healthy back",
    "ideas for a school science project", "ways to say thank you", "tips for keeping a diary",
    "things to do in a new city", "rules for writing clean code", "ways to save energy at home",
)
THINGS_ZH = (
    "个提高睡眠质量的方法", "个省钱的小窍门", "种健康的早餐", "本适合初学者的编程书", "件去海边要带的东西",
    "个面试时可以问的问题", "个学习时保持专注的方法", "道简单的家常菜", "个送给小朋友的礼物", "个成功人士的习惯",
    "件下雨天可以做的事", "个缓解工作压力的办法", "个新手司机常犯的错误", "种好养的室内植物", "个学做饭的建议",
    "个在新城市交朋友的方法", "个学外语的理由", "部值得一看的经典电影", "个在家就能做的运动", "个减少塑料使用的方法",
    "个写好简历的技巧", "个需要休息的信号", "个适合全家玩的桌游", "个练好字的方法", "件养狗前要知道的事",
    "个用手机拍好照片的技巧", "种健康的零食", "个早上提高效率的方法", "个看病时可以问医生的问题", "个让聊天不冷场的办法",
    "个长途飞行的建议", "件厨房必备的工具", "个投资时要避免的错误", "个学好数学的方法", "个不花钱的爱好",
    "个开好线上会议的建议", "个让孩子在家不无聊的办法", "项改变世界的发明", "个保持好心情的方法", "个第一次跑步的建议",
    "件买二手车前要检查的事", "个让电脑变快的方法", "个第一次约会的建议", "个保护颈椎的好习惯", "个有趣的科学实验",
    "种表达感谢的方式", "个坚持写日记的技巧", "个旅游时省钱的方法", "个写好代码的原则", "个在家节约用电的办法",
)
NUMBERS_EN = ("three", "four", "five", "six", "seven", "ten")
NUMBERS_ZH = ("三", "四", "五", "六", "七", "十")
FOLLOWUPS_EN = (
    "Please keep it short.", "Can you give me an example?", "Why does that matter?", "Explain it like I am five.",
    "What is a common mistake people make?", "Can you put that in a table?", "How is it different in China?",
    "What should I read next?", "Can you say that in Chinese?", "Thanks! Where did it come from?",
    "I still don't get it. Can you try again?", "Give me a quiz question about it.",
)
FOLLOWUPS_ZH = (
    "请简短一点。", "能举个例子吗？", "这为什么重要？", "能讲得更简单些吗？", "人们常犯什么错误？", "能用表格总结一下吗？",
    "在国外也是这样吗？", "我接下来该读什么书？", "能用英文说一遍吗？", "谢谢！它最早是从哪里来的？",
    "我还是不太懂，能再解释一下吗？", "给我出一道相关的小测验题。",
)


@dataclass(frozen=True)
class Family:
    """Prompts of one kind: each template with its slots filled from ``slots`` in every way."""
    name: str
    language: str  # "en", "zh" or "code"
    weight: float  # share of draws (renormalised over the families)
    templates: tuple[str, ...]
    slots: tuple[tuple[str, tuple], ...] = ()  # (slot name, values); a value may be a tuple of strings

    def slot_names(self, template: str) -> list[str]:
        """The slots ``template`` uses, in the order of ``slots``."""
        used = {field.split("[")[0] for _, field, _, _ in string.Formatter().parse(template) if field}
        return [name for name, _ in self.slots if name in used]

    def prompts(self) -> Iterator[str]:
        values = dict(self.slots)
        for template in self.templates:
            names = self.slot_names(template)
            for choice in itertools.product(*(values[name] for name in names)):
                yield template.format(**dict(zip(names, choice)))

    def draw(self, generator: torch.Generator) -> str:
        template = self.templates[int(torch.randint(len(self.templates), (), generator=generator))]
        values = dict(self.slots)
        return template.format(**{name: values[name][int(torch.randint(len(values[name]), (), generator=generator))]
                                  for name in self.slot_names(template)})


FAMILIES = (
    Family("ask-en", "en", 0.20, (
        "What is {topic}?", "Can you explain {topic} in simple words?", "Why is {topic} important?",
        "Write a short paragraph about {topic}.", "Give me three facts about {topic}.",
        "How do I get started with {topic}?", "Explain {topic} to a ten-year-old.",
        "Summarize the main ideas of {topic}.", "What are the pros and cons of {topic}?",
        "Write a short story about {topic}.", "Write an email to a friend about {topic}.",
        "Q: What do you know about {topic}?\nA:", "Tell me something surprising about {topic}.",
        "Compare {topic} with something from everyday life.", "Write a haiku about {topic}.",
        "I am learning about {topic}. Where should I begin?",
        "Translate into Chinese: I would like to learn more about {topic}.",
        "What is the history of {topic}?", "Write a blog post introduction about {topic}.",
        "What do most people get wrong about {topic}?", "Describe {topic} in one sentence.",
        "Write a poem about {topic}.", "What would the world look like without {topic}?",
        "Create a short quiz about {topic}.", "Explain {topic} step by step.",
        "Write a tweet about {topic}.", "What are the biggest open questions about {topic}?",
        "How would you teach {topic} to a beginner?", "Write a dialogue between two students about {topic}.",
        "What are some good resources for learning about {topic}?", "Give an analogy that explains {topic}.",
        "Is {topic} overrated? Give both sides.", "Write a news headline and a short article about {topic}.",
        "How has {topic} changed in the last fifty years?", "Write the opening of a lecture on {topic}.",
        "Explain {topic}, then give a real-world example.", "What should a high school student know about {topic}?",
        "Please write a short essay on {topic}.", "Tell me a joke about {topic}.",
        "Write a product description inspired by {topic}.",
    ), (("topic", TOPICS_EN),)),
    Family("ask-zh", "zh", 0.20, (
        "什么是{topic}？", "请用简单的话解释一下{topic}。", "为什么{topic}很重要？", "写一段关于{topic}的短文。",
        "请列出关于{topic}的三个事实。", "我该如何开始学习{topic}？", "给小学生讲讲{topic}。", "总结一下{topic}的要点。",
        "{topic}有哪些优点和缺点？", "写一个关于{topic}的小故事。", "问：你了解{topic}吗？\n答：",
        "请给朋友写一封信，谈谈{topic}。", "关于{topic}，有什么有趣的知识？", "用一首短诗描写{topic}。",
        "我最近在学{topic}，有什么建议吗？", "把这句话翻译成英文：我想多了解一些{topic}。", "{topic}的历史是怎样的？",
        "请写一篇关于{topic}的博客开头。", "大家对{topic}最常见的误解是什么？", "用一句话描述{topic}。",
        "写一首关于{topic}的现代诗。", "如果没有{topic}，世界会是什么样子？", "出几道关于{topic}的小测验题。",
        "请一步一步地解释{topic}。", "写一条关于{topic}的朋友圈。", "关于{topic}，还有哪些没有解决的问题？",
        "你会怎样给初学者讲{topic}？", "写一段两个同学讨论{topic}的对话。", "学习{topic}有哪些好的资料？",
        "用一个比喻来解释{topic}。", "{topic}是不是被高估了？请说说正反两方面。", "写一条关于{topic}的新闻。",
        "这五十年来{topic}有什么变化？", "请写一篇关于{topic}的演讲稿开头。", "先解释{topic}，再举一个生活中的例子。",
        "中学生应该了解{topic}的哪些知识？", "请写一篇关于{topic}的小作文。", "讲一个和{topic}有关的笑话。",
        "以{topic}为主题写一段广告词。", "请从三个方面介绍{topic}。",
    ), (("topic", TOPICS_ZH),)),
    Family("list-en", "en", 0.07, (
        "List {n} {things}.", "Give me {n} {things}.", "What are {n} {things}?",
        "Name {n} {things} and explain each in one sentence.", "Make a numbered list of {n} {things}.",
        "Write a checklist of {n} {things}.\n\n1.", "Here are {n} {things}:\n1.", "Can you suggest {n} {things}?",
    ), (("n", NUMBERS_EN), ("things", THINGS_EN))),
    Family("list-zh", "zh", 0.07, (
        "请列出{n}{things}。", "给我推荐{n}{things}。", "说出{n}{things}，并简单解释。", "用列表的形式写出{n}{things}：\n1.",
        "你能给我{n}{things}吗？", "帮我整理{n}{things}。", "写出{n}{things}，每条一句话。", "以下是{n}{things}：\n1.",
    ), (("n", NUMBERS_ZH), ("things", THINGS_ZH))),
    Family("code-en", "code", 0.10, (
        "Write a {lang[0]} function that {task[0]}.", "Write a {lang[0]} function that {task[0]}.\n\n```{lang[1]}\n",
        "How do I write a function in {lang[0]} that {task[0]}?",
        "Implement a function in {lang[0]} that {task[0]}, and explain how it works.",
        "Show me a {lang[0]} example that {task[0]}, with comments.",
        "Write unit tests in {lang[0]} for a function that {task[0]}.",
    ), (("lang", LANGUAGES), ("task", TASKS))),
    Family("code-zh", "zh", 0.06, (
        "用{lang[0]}写一个函数，{task[1]}。", "用{lang[0]}写一个函数，{task[1]}。\n\n```{lang[1]}\n",
        "如何用{lang[0]}实现一个函数来{task[1]}？", "请用{lang[0]}{task[1]}，并加上注释。",
    ), (("lang", LANGUAGES), ("task", TASKS))),
    Family("code-open", "code", 0.02, (
        "def {task[2]}({task[3]}):\n", "# {task[1]}\ndef {task[2]}({task[3]}):\n",
        "# A function that {task[0]}.\ndef {task[2]}({task[3]}):\n",
        "def {task[2]}({task[3]}):\n    \"\"\"A function that {task[0]}.\"\"\"\n",
    ), (("task", TASKS),)),
    Family("code-fixed", "code", 0.02, (
        "# Python: read a CSV file and print the average of each column\nimport csv\n\n",
        "import numpy as np\n\n\ndef normalize(x):\n", "class Stack:\n    def __init__(self):\n",
        "# 读取文件并统计每个单词出现的次数\nfrom collections import Counter\n\n", "function debounce(fn, delay) {{\n",
        "SELECT name, COUNT(*) AS orders\nFROM customers\n", "#include <stdio.h>\n\nint main(void) {{\n",
        "for i in range(10):\n", "$ git status\n", "import requests\n\nresponse = requests.get(",
        "class Node:\n    def __init__(self, value):\n", "$ docker run -it ", "<!DOCTYPE html>\n<html>\n<head>\n",
        "CREATE TABLE users (\n", "fn main() {{\n", "package main\n\nimport \"fmt\"\n\nfunc main() {{\n",
    )),
    Family("dialogue-en", "en", 0.13, tuple(
        f"User: {question}\nAssistant: {answer}\nUser: {{followup}}\nAssistant:" for question, answer in (
            ("Hi! Can you tell me about {topic}?", "Of course. What would you like to know first?"),
            ("What is {topic}?", "Here is a short overview, starting with the basics."),
            ("I have an exam on {topic} tomorrow.", "Good luck! Let's go over the key points together."),
            ("Why do people care about {topic}?", "There are a few reasons, and they are easy to explain."),
            ("My friend keeps talking about {topic}. What is it?", "Sure, let me explain it in plain words."),
            ("Teach me about {topic} in five minutes.", "Okay, let's start with the single most important idea."),
        )), (("topic", TOPICS_EN), ("followup", FOLLOWUPS_EN))),
    Family("dialogue-zh", "zh", 0.13, tuple(
        f"用户：{question}\n助手：{answer}\n用户：{{followup}}\n助手：" for question, answer in (
            ("你好！能给我讲讲{topic}吗？", "当然可以。你想先了解哪方面？"),
            ("什么是{topic}？", "简单来说，我们可以从基础讲起。"),
            ("我明天要考{topic}。", "加油！我们一起复习一下重点。"),
            ("为什么大家都关心{topic}？", "原因有几个，其实不难理解。"),
            ("我朋友总在聊{topic}，那是什么？", "好的，我用简单的话给你解释。"),
            ("用五分钟教我{topic}。", "好的，我们先讲最重要的一点。"),
        )), (("topic", TOPICS_ZH), ("followup", FOLLOWUPS_ZH))),
)
# what the held-out prompts must not mention (tests/test_chat_prompts.py)
TOPICS = {"en": TOPICS_EN + THINGS_EN + tuple(task[0] for task in TASKS),
          "zh": TOPICS_ZH + THINGS_ZH + tuple(task[1] for task in TASKS)}


def all_prompts() -> Iterator[tuple[str, str]]:
    """(family name, prompt) for every prompt :func:`chat_prompt` can return."""
    for family in FAMILIES:
        for prompt in family.prompts():
            yield family.name, prompt


def prompt_count() -> int:
    """How many distinct prompts ``chat_prompt`` can return."""
    return len({prompt for _, prompt in all_prompts()})


def chat_prompt(generator: torch.Generator) -> tuple[str, str]:
    """(language, prompt): a question, instruction, list, dialogue or code request in English or Chinese,
    or a code opening; the family by weight, then its template and slot values uniformly."""
    weights = torch.tensor([family.weight for family in FAMILIES], dtype=torch.double)
    family = FAMILIES[int(torch.multinomial(weights, 1, generator=generator))]
    return family.language, family.draw(generator)
