"""Every bound the lab enforces, defined once: what one request may ask for (``DecodeRequest``), the
draft shapes, and what a trace file may hold (``core.records.trace``, which reads files written by
any earlier version of the lab). The page's tighter bounds for a visitor are the app's own
(``app.page_limits``)."""
from __future__ import annotations

# ---- one request (CLI, Python API, the page: DecodeRequest validates them) ---------------------
MAX_PROMPT_CHARS = 100_000  # the context check after tokenising is the real limit; this bounds the work before it
MAX_NEW_TOKENS = 4096
MAX_TEMPERATURE = 10.0
MIN_TEMPERATURE = 0.01  # the smallest sampling temperature: logits / T must stay finite in float32
MAX_SEED = 2**63 - 1
MAX_BLOCK_SIZE = 256  # KV cache block size in tokens
MAX_MODEL_REF = 1000  # characters of a model folder path or hub id

# ---- draft shapes --------------------------------------------------------------------------------
MAX_WIDTH = 8  # children per node of a full tree (EAGLE-2's top-k)
MAX_DEPTH = 16  # draft levels
MAX_TREE_NODES = 128  # nodes one verify may hold
MAX_ALTERNATIVES = 5  # the target's top tokens an inspected step records per verified position
MAX_REJECTION_TOKENS = 16  # candidate tokens an inspected step records for its rejected node

# ---- trace files (docs/trace.md): what any run could have written, nothing more -----------------
MIB = 2**20
MAX_TRACE_BYTES = 20 * MIB  # the app's upload limit too
MAX_TRACE_LINES = MAX_NEW_TOKENS + 2  # a header, a summary, and a step emits at least one token
MAX_PROMPT_TOKENS = 32_768  # longer than any context the app or the CLI is used with
MAX_TOKEN_ID = 2**24  # vocabularies are far smaller (Gemma 3: 262,144)
MAX_TOKEN_TEXT = 1_024  # characters one token adds to the text
MAX_OUTPUT_CHARS = MAX_NEW_TOKENS * 256
MAX_LABEL = 64  # drafter, proposer, device, dtype, stop reason
MAX_SECONDS = 86_400.0

# ---- files the lab reads from its user (core.common.files.read_capped) ----------------------------------
MAX_PROMPTS_FILE_BYTES = 4 * MIB  # --prompts of bench and serve-metrics
MAX_CONFIG_BYTES = 4 * MIB  # a model's or a drafter's config.json (and vocab_map.json)
MAX_SAFETENSORS_HEADER = 16 * MIB  # the JSON header of a drafter's model.safetensors

# ---- model and drafter folders (core.models.loading.ModelFields, core.drafters.weights) --------
MAX_HIDDEN = 65_536  # past the largest open models, far below an overflow
MAX_LAYERS = 1_024
MAX_HEADS = 1_024
MAX_CONTEXT = 2**24
MAX_PARAMETERS = 2 * 10**12
