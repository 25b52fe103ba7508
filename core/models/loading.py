"""Presets and model loading: the embedded tiny family, or any transformers causal LM by folder or hub id.

Loaded models are cached per process (key: path, device), so the app and repeated
``core.generate`` calls load each model once; the cache keeps the ``MAX_LOADED_MODELS`` used most
recently (a decode in progress holds its own models, so dropping one from the cache never breaks it).
A hub id that is not in the local hub cache is fetched only when the hub answers within
``HUB_PROBE_TIMEOUT_S``; otherwise loading fails at once with a message, not after minutes of retries.
"""
from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from core.errors import UserError
from core.models import gemma
from core.runtime.kernels import pack_linears

ASSETS = Path(__file__).resolve().parents[2] / "assets"


@dataclass(frozen=True)
class Preset:
    name: str
    target: str
    draft: str | None
    description: str
    drafters: str | None = None  # folder holding the learned drafters' weights (medusa, eagle, eagle3)
    drafter: str | None = None  # the drafter a page opens with (None: "draft" with a draft model, else "ngram")

    @property
    def default_drafter(self) -> str:
        return self.drafter or ("draft" if self.draft else "ngram")


PRESETS = {
    "tiny": Preset(
        name="tiny",
        target=str(ASSETS / "tiny" / "target"),
        draft=str(ASSETS / "tiny" / "draft"),
        description="embedded Llama-architecture pair trained here (Chinese + English), instant start",
        drafters=str(ASSETS / "tiny"),
    ),
    "gemma-270m": Preset(
        name="gemma-270m",
        target=str(gemma.cache_dir()),  # resolve_preset converts it there on first use
        draft=str(ASSETS / "gemma-270m" / "draft"),
        description="Gemma 3 270M (Gemma Terms of Use) with drafters trained here; needs the Gemma packages",
        drafters=str(ASSETS / "gemma-270m"),
        drafter="hybrid",  # n-gram lookup + EAGLE-3 in one tree: the drafter that pays here (docs/gemma.md)
    ),
}


def default_preset() -> str:
    """``gemma-270m`` when its packages are installed (or it is already converted), else ``tiny``."""
    return "gemma-270m" if gemma.available() else "tiny"


VOCAB_MAP_FILE = "vocab_map.json"  # in a draft folder over a reduced vocabulary: its rows' target ids


@dataclass(frozen=True)
class VocabMap:
    """A draft over a reduced vocabulary: draft id i is target id ``target_ids[i]``; the draft's
    ids from ``len(target_ids)`` on (e.g. one "any other token" id) have no target id.

    ``tokens_sha256`` fingerprints the target tokens at those ids, so a draft made for one
    tokenizer is refused with another.
    """

    target_ids: tuple[int, ...]
    other_id: int  # the draft id a target token outside the reduced vocabulary is read as
    tokens_sha256: str


def vocab_digest(tokenizer, target_ids) -> str:
    tokens = tokenizer.convert_ids_to_tokens(list(target_ids))
    return hashlib.sha256("\n".join(map(str, tokens)).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class LoadedModel:
    path: str
    model: torch.nn.Module
    tokenizer: object  # None for a draft over a reduced vocabulary (it reads the target's, via vocab_map)
    context_length: int
    eos_ids: frozenset[int]
    vocab_map: VocabMap | None = None

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def vocab_size(self) -> int:
        """Rows of the LM head (may exceed the tokenizer's vocabulary when padded)."""
        return self.model.get_output_embeddings().weight.shape[0]


MAX_LOADED_MODELS = 6  # a preset's target and its three draft sizes, and two more
HUB_PROBE_TIMEOUT_S = 3.0
ANSI_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_loaded: OrderedDict[tuple[str, str], LoadedModel] = OrderedDict()  # least recently used first
_lock = threading.Lock()


def pick_device(device: str | None = None) -> torch.device:
    """``None``/"auto": CUDA when available, else CPU."""
    if device in (None, "", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        chosen = torch.device(device)
    except RuntimeError:
        raise UserError(f"unknown device {device!r} (use auto, cpu or cuda)") from None
    if chosen.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for, but no CUDA device is available")
    if chosen.type not in ("cpu", "cuda"):
        raise UserError(f"unsupported device {device!r} (use auto, cpu or cuda)")
    return chosen


def resolve_preset(preset: str) -> Preset:
    """A preset name, a local model folder (target only), or a hub id.

    ``gemma-270m`` is converted here on first use (minutes, with progress on stderr).
    """
    if preset == "gemma-270m":
        folder = str(gemma.ensure_converted())
        draft = PRESETS[preset].draft
        return replace(PRESETS[preset], target=folder, draft=draft if (Path(draft) / "config.json").is_file() else None)
    if preset in PRESETS:
        return PRESETS[preset]
    if Path(preset).is_dir():
        return Preset(name=preset, target=preset, draft=None, description="local model folder")
    if preset.count("/") == 1 and not preset.startswith((".", "/")):
        return Preset(name=preset, target=preset, draft=None, description="hub id")
    known = ", ".join(sorted(PRESETS))
    raise UserError(f"unknown preset {preset!r}: use one of {known}, a model folder, or a hub id like org/name")


def drafter_home(target_path: str) -> Path:
    """Where the learned drafters for ``target_path`` live: the preset's drafter folder for a
    preset's target (Gemma's converted target sits in a cache, its drafters in ``assets``), else
    the target folder's parent."""
    resolved = Path(target_path).resolve()
    for preset in PRESETS.values():
        target = Path(gemma.cache_dir()) if preset.name == "gemma-270m" else Path(preset.target)
        if preset.drafters and target.resolve() == resolved:
            return Path(preset.drafters)
    return resolved.parent


def load_model(path: str, device: str | None = None, trust_remote_code: bool = False) -> LoadedModel:
    """Load (once per process) a causal LM and its tokenizer: fp32 on CPU, bf16 on CUDA."""
    torch_device = pick_device(device)
    key = (str(path), str(torch_device))
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
        loaded = _load(str(path), torch_device, trust_remote_code)
        _loaded[key] = loaded
        while len(_loaded) > MAX_LOADED_MODELS:
            _loaded.popitem(last=False)
        return loaded


def _load(path: str, torch_device: torch.device, trust_remote_code: bool) -> LoadedModel:
    """Read a model folder or hub id: fp32 on CPU, bf16 on CUDA; a failure is a UserError."""
    dtype = torch.bfloat16 if torch_device.type == "cuda" else torch.float32
    vocab_map = read_vocab_map(path)
    local_only = not Path(path).is_dir() and hub_offline()
    options = dict(trust_remote_code=trust_remote_code, local_files_only=local_only)
    try:
        tokenizer = None if vocab_map else AutoTokenizer.from_pretrained(path, **options)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **options)
    except (OSError, ValueError) as e:
        text = ANSI_CODE.sub("", str(e)).strip()
        first_line = text.splitlines()[0] if text else type(e).__name__
        if "custom code" in text or "trust_remote_code" in text:
            first_line = ("it ships its own model code, which runs only with --trust-remote-code "
                          "(trust_remote_code=True); read that code first")
        elif local_only:
            first_line = (f"it is not in the local hub cache and the hub ({hub_endpoint()}) cannot be reached; "
                          "download it where there is a network, or pass a local model folder")
        raise UserError(f"could not load model {path!r}: {first_line}") from None
    model.to(torch_device).eval()
    if torch_device.type == "cpu":
        pack_linears(model)  # faster multi-row verifies (core.runtime.kernels); small models are left alone
    config = model.config.get_text_config()
    context = getattr(config, "max_position_embeddings", None) or tokenizer.model_max_length
    window = sliding_window(config)
    if window is not None:  # the tree mask spans the whole sequence: stay inside the window
        context = min(context, window)
    eos = model.generation_config.eos_token_id
    if eos is None and tokenizer is not None:
        eos = tokenizer.eos_token_id
    eos_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
    return LoadedModel(path, model, tokenizer, int(context), eos_ids, vocab_map)


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def hub_offline() -> bool:
    """True when a hub id must be read from the local hub cache only: the hub is switched off
    (``HF_HUB_OFFLINE``), or it does not answer a connection within ``HUB_PROBE_TIMEOUT_S``."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return True
    endpoint = urlparse(hub_endpoint())
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return True
    return False


def read_vocab_map(path: str) -> VocabMap | None:
    """The reduced-vocabulary map of a local draft folder, if it has one."""
    file = Path(path) / VOCAB_MAP_FILE
    if not file.is_file():
        return None
    data = json.loads(file.read_text(encoding="utf-8"))
    return VocabMap(tuple(data["target_ids"]), int(data["other_id"]), data["tokens_sha256"])


def sliding_window(config) -> int | None:
    """The attention window of a model with sliding-window layers (Gemma 3, Mistral), else None.

    The engine's tree mask lets every token see the whole sequence, which is exact only while
    the sequence fits the window; ``load_model`` therefore caps the usable context there.
    """
    window = getattr(config, "sliding_window", None)
    if not window:
        return None
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:
        return window if "sliding_attention" in layer_types else None
    return window if getattr(config, "use_sliding_window", True) else None


def check_same_tokenizer(target: LoadedModel, draft: LoadedModel) -> None:
    """Refuse a draft whose tokenizer maps tokens to other ids than the target's.

    A vocabulary that is only larger (extra or padding tokens at the end) is tolerated: every
    token of the smaller one must have the same id in the larger. A draft over a reduced
    vocabulary (``vocab_map``) must name the same tokens at its target ids.
    """
    if draft.vocab_map is not None:
        ids = draft.vocab_map.target_ids
        if max(ids) >= len(target.tokenizer) or vocab_digest(target.tokenizer, ids) != draft.vocab_map.tokens_sha256:
            raise UserError(
                "the draft's tokenizer differs from the target's: its reduced vocabulary was made for another "
                "tokenizer (the tokens at its target ids differ); the draft must share the target's tokenizer"
            )
        return
    target_vocab = target.tokenizer.get_vocab()
    draft_vocab = draft.tokenizer.get_vocab()
    smaller, larger = sorted((target_vocab, draft_vocab), key=len)
    mismatched = [tok for tok, idx in smaller.items() if larger.get(tok) != idx]
    if mismatched:
        examples = ", ".join(repr(t) for t in sorted(mismatched)[:3])
        raise UserError(
            f"the draft's tokenizer differs from the target's: {len(mismatched)} of {len(smaller)} tokens "
            f"have other ids (e.g. {examples}); the draft must share the target's tokenizer"
        )
