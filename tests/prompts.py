"""Prompts for the lossless tests: Chinese and English, short and long, some repetitive."""

LOSSLESS_PROMPTS = [
    "我爱",
    "我爱中国",
    "春眠不觉晓，",
    "床前明月光，疑是地上霜。",
    "白日依山尽，黄河入海流。欲穷千里目，",
    "国破山河在，城春草木深。感时花溅泪，恨别鸟惊心。烽火连三月，家书抵万金。",
    "中国中国中国中国中国中国",
    "明月明月明月，",
    "人生",
    "大江东去，浪淘尽，千古风流人物。",
    "It is a truth universally acknowledged",
    "The",
    "Elizabeth",
    "She was",
    "In the beginning God created the heaven and the earth.",
    "the the the the the the the the",
    "Mr. Darcy said that he had never seen",
    "And God said, Let there be light: and there was light. And God saw the light, that it was good:",
    "I love China. 我爱中国。",
    "Hello, world! 你好，世界！",
    "one two three one two three one two three",
    "It was the best of times, it was the worst of times, it was the age of wisdom,"
    " it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity,",
    "她说：",
    "x",
]
