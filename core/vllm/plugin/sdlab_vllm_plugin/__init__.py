"""The lab's vLLM plugin: gives Gemma 3 the EAGLE-3 interface vLLM 0.32 lacks for it.

vLLM calls :func:`register` in each of its processes (entry point ``vllm.general_plugins``). It
registers :class:`~sdlab_vllm_plugin.gemma3.Gemma3ForCausalLMEagle3` under the architecture name
``Gemma3ForCausalLM``, in place of vLLM's own class (a subclass of it: weights, attention and
sampling are vLLM's; only the forward also hands out the hidden states EAGLE-3 fuses).
The class is named by a string, so vLLM imports it only when a Gemma 3 model is loaded.
"""

ARCHITECTURE = "Gemma3ForCausalLM"


def register() -> None:
    from vllm import ModelRegistry

    ModelRegistry.register_model(ARCHITECTURE, "sdlab_vllm_plugin.gemma3:Gemma3ForCausalLMEagle3")
