"""llama.cpp as the lab's CPU peer, driven from outside: ``python -m core llamacpp setup|status`` and
``python -m core bench --compare-llamacpp``.

llama-cpp-python lives in a virtual environment of its own (``env``: its wheel built once, portable,
and kept), where ``runner.py`` is run as a subprocess that speaks JSON lines; ``client`` is the lab's
side of that conversation and ``peer`` the bench's warm runners, plain decoding and prompt lookup on
the ``gemma-270m`` preset's own GGUF. docs/llamacpp.md.
"""
