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
from typing import Annotated
from urllib.parse import urlparse

import psutil
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from core.common.errors import UserError, listed, one_line
from core.common.files import read_capped
from core.common.limits import (MAX_CONFIG_BYTES, MAX_CONTEXT, MAX_HEADS, MAX_HIDDEN, MAX_LAYERS, MAX_PARAMETERS,
                         MAX_TOKEN_ID)
from core.models import gemma
from core.runtime.kernels import pack_linears
from core.runtime.quantized import PRECISIONS, QuantizationUnavailable, quantize_body

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
    precision: str = "float32"  # the body's arithmetic on CPU: float32, or int8 (core.runtime.quantized)

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
_loaded: OrderedDict[tuple[str, str, str], LoadedModel] = OrderedDict()  # least recently used first
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


def load_model(path: str, device: str | None = None, trust_remote_code: bool = False,
               precision: str = "float32") -> LoadedModel:
    """Load (once per process) a causal LM and its tokenizer: fp32 on CPU, bf16 on CUDA; with
    ``precision="int8"`` a CPU target whose body computes in int8 (``core.runtime.quantized``)."""
    torch_device = pick_device(device)
    if precision not in PRECISIONS:
        raise UserError(f"unknown target precision {precision!r} (use {' or '.join(PRECISIONS)})")
    if precision != "float32" and torch_device.type != "cpu":
        raise UserError(f"the {precision} target runs on the CPU only (this run is on {torch_device})")
    key = (str(path), str(torch_device), precision)
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
        loaded = _load(str(path), torch_device, trust_remote_code, precision)
        _loaded[key] = loaded
        while len(_loaded) > MAX_LOADED_MODELS:
            _loaded.popitem(last=False)
        return loaded


class ModelFields(BaseModel):
    """The config fields the lab reads from a model (its text config), in sane ranges: checked, with a
    memory estimate, before anything is allocated (``check_config``)."""

    model_config = ConfigDict(extra="ignore")

    vocab_size: Annotated[int, Field(ge=2, le=MAX_TOKEN_ID)]
    hidden_size: Annotated[int, Field(ge=1, le=MAX_HIDDEN)]
    num_hidden_layers: Annotated[int, Field(ge=1, le=MAX_LAYERS)]
    num_attention_heads: Annotated[int, Field(ge=1, le=MAX_HEADS)]
    num_key_value_heads: Annotated[int, Field(ge=1, le=MAX_HEADS)] | None = None
    head_dim: Annotated[int, Field(ge=1, le=MAX_HIDDEN)] | None = None
    intermediate_size: Annotated[int, Field(ge=1, le=8 * MAX_HIDDEN)] | None = None
    max_position_embeddings: Annotated[int, Field(ge=1, le=MAX_CONTEXT)] | None = None
    tie_word_embeddings: bool | None = None

    def parameters(self) -> int:
        """About how many weights the model has (a dense decoder; an MoE's experts are not counted)."""
        head_dim = self.head_dim or self.hidden_size // self.num_attention_heads
        kv = (self.num_key_value_heads or self.num_attention_heads) * head_dim
        attention = 2 * self.hidden_size * self.num_attention_heads * head_dim + 2 * self.hidden_size * kv
        mlp = 3 * self.hidden_size * (self.intermediate_size or 4 * self.hidden_size)
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings is not False else 2)
        return embeddings + self.num_hidden_layers * (attention + mlp)


def fields_error(where: str, error: ValidationError) -> UserError:
    """A pydantic error as one line naming the field, without echoing a huge value."""
    first = error.errors()[0]
    name = ".".join(str(p) for p in first["loc"]) or "config"
    return UserError(f"{where}: {name}: {first['msg']}")


def check_memory(parameters: int, bytes_per_weight: int, what: str) -> None:
    """Refuse, before allocating, a model whose weights would not fit the memory available now."""
    need = parameters * bytes_per_weight
    available = psutil.virtual_memory().available
    if parameters > MAX_PARAMETERS or need > available:
        raise UserError(f"{what} needs about {need / 2**30:,.1f} GiB for its weights ({parameters:,} parameters); "
                        f"{available / 2**30:,.1f} GiB of memory is available")


def check_symlinks(folder: str | Path) -> None:
    """Every file of a model or drafter folder must stay inside it: a symlink out is refused."""
    root = Path(folder).resolve()
    for entry in Path(folder).rglob("*"):
        if entry.is_symlink() and not entry.resolve().is_relative_to(root):
            raise UserError(f"{folder}: {entry.name} is a symlink to outside the folder")


def read_json(file: Path, what: str) -> dict:
    """A JSON object from ``file`` (at most ``MAX_CONFIG_BYTES``); anything else is a UserError."""
    try:
        data = json.loads(read_capped(file, MAX_CONFIG_BYTES, what))
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        raise UserError(f"{what} {str(file)!r} is not valid JSON: {one_line(str(e), 200)}") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {str(file)!r} is not a JSON object")
    return data


def check_config(path: str, config, dtype: torch.dtype) -> ModelFields:
    """The text config's fields the lab reads, in range, and the weights' memory estimate."""
    text = config.get_text_config()
    try:
        fields = ModelFields.model_validate({name: getattr(text, name, None) for name in ModelFields.model_fields
                                             if getattr(text, name, None) is not None})
    except ValidationError as e:
        raise fields_error(f"could not load model {path!r}: config.json", e) from None
    check_memory(fields.parameters(), torch.finfo(dtype).bits // 8, f"model {path!r}")
    return fields


def _config(path: str, options: dict):
    """The model's config, read and checked before any weight is allocated."""
    if Path(path).is_dir():
        check_symlinks(path)
        read_json(Path(path) / "config.json", "model config")
    try:
        return AutoConfig.from_pretrained(path, **options)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise load_error(path, e, options["local_files_only"]) from None


def load_error(path: str, e: Exception, local_only: bool) -> UserError:
    """transformers' error while loading ``path`` as one line (what to do, when it is known)."""
    text = ANSI_CODE.sub("", str(e)).strip()
    first_line = one_line(text) or type(e).__name__
    if "custom code" in text or "trust_remote_code" in text:
        first_line = ("it ships its own model code, which runs only with --trust-remote-code "
                      "(trust_remote_code=True); read that code first")
    elif local_only:
        first_line = (f"it is not in the local hub cache and the hub ({hub_endpoint()}) cannot be reached; "
                      "download it where there is a network, or pass a local model folder")
    return UserError(f"could not load model {path!r}: {first_line}")


def _check_loaded(path: str, info: dict) -> None:
    """Refuse a model whose weights did not all load (transformers would fill them at random)."""
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        keys = sorted(str(k if isinstance(k, str) else k[0]) for k in info.get(kind) or ())
        if keys:
            raise UserError(f"could not load model {path!r}: its weights do not fit its architecture "
                            f"({kind.replace('_', ' ')}: {listed(keys)})")


def _load(path: str, torch_device: torch.device, trust_remote_code: bool, precision: str) -> LoadedModel:
    """Read a model folder or hub id: fp32 on CPU, bf16 on CUDA; a failure is a UserError."""
    dtype = torch.bfloat16 if torch_device.type == "cuda" else torch.float32
    vocab_map = read_vocab_map(path)
    local_only = not Path(path).is_dir() and hub_offline()
    options = dict(trust_remote_code=trust_remote_code, local_files_only=local_only)
    check_config(path, _config(path, options), dtype)
    try:
        tokenizer = None if vocab_map else AutoTokenizer.from_pretrained(path, **options)
        model, info = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, output_loading_info=True, **options)
    except (OSError, ValueError, KeyError, SafetensorError) as e:
        raise load_error(path, e, local_only) from None
    _check_loaded(path, info)
    model.to(torch_device).eval()
    if precision == "int8":
        quantize(path, model)
    elif torch_device.type == "cpu":
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
    return LoadedModel(path, model, tokenizer, int(context), eos_ids, vocab_map, precision)


def quantize(path: str, model) -> None:
    """The int8 body (``core.runtime.quantized``), or a UserError where this CPU cannot run it."""
    try:
        quantize_body(model)
    except QuantizationUnavailable as e:
        raise UserError(f"could not make model {path!r} an int8 target: {e}") from None


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
    try:
        data = VocabMapFile.model_validate(read_json(file, "vocab map"))
    except ValidationError as e:
        raise fields_error(f"{file}", e) from None
    return VocabMap(tuple(data.target_ids), data.other_id, data.tokens_sha256)


class VocabMapFile(BaseModel):
    target_ids: Annotated[list[Annotated[int, Field(ge=0, lt=MAX_TOKEN_ID)]], Field(min_length=1, max_length=MAX_TOKEN_ID)]
    other_id: Annotated[int, Field(ge=0, lt=MAX_TOKEN_ID)]
    tokens_sha256: Annotated[str, Field(max_length=64)]


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
