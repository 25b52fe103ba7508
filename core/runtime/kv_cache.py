"""A paged KV cache the engine owns, plugged into transformers through its Cache interface.

Vocabulary (as in vLLM and the reference article):

* a **slot** holds the K/V of one token in one layer; slots live in one pool tensor per layer,
  ``PagedKVCache.keys[layer]`` (and ``values[layer]``) of shape ``[num_blocks * block_size, num_kv_heads, head_dim]``;
* a **block** is ``block_size`` consecutive slots; blocks are handed out from a free list;
* a request's **block table** lists the blocks it owns; its **slot mapping** (``committed``)
  lists, in sequence order, the slot of every committed token. Slot ``s`` lives in block
  ``s // block_size`` at offset ``s % block_size``.

A speculative step writes the K/V of every tree node once into freshly allocated slots
(``pending``). ``commit(keep)`` appends the accepted nodes' slots to the slot mapping -- no
recompute, the slots need not be contiguous -- and releases every other pending slot. A block
left with no live slot goes back to the pool. This is the article's
``update_block_table(request, accepted_length)``.

Worked example (block_size 4): the prompt fills slots 0..5 (blocks 0, 1). A 3-node tree gets
slots 6, 7 and, spilling over, 8 in a fresh block 2. The target accepts the first node only:
the slot mapping becomes [0..5, 6], slots 7 and 8 are freed, block 2 has no live slot left and
returns to the pool (``blocks_freed`` += 1).
"""
from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, field

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from core.common.errors import KVCacheFull
from core.records.steps import KVStepRecord


class BlockPool:
    """Fixed number of blocks with a free list (lowest id first, so runs are reproducible)."""

    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free = list(range(num_blocks))
        heapq.heapify(self._free)
        self.peak_in_use = 0

    @property
    def blocks_in_use(self) -> int:
        return self.num_blocks - len(self._free)

    def allocate(self) -> int:
        if not self._free:
            raise KVCacheFull(
                f"KV cache full: all {self.num_blocks} blocks of {self.block_size} slots are in use"
            )
        block = heapq.heappop(self._free)
        self.peak_in_use = max(self.peak_in_use, self.blocks_in_use)
        return block

    def release(self, block: int) -> None:
        heapq.heappush(self._free, block)


@dataclass
class KVCounters:
    """Run totals for one request's cache."""

    slots_written: int = 0
    slots_freed: int = 0
    blocks_allocated: int = 0
    blocks_freed: int = 0  # returned to the pool by commit (rejections), not by the final release
    peak_blocks_in_use: int = 0


@dataclass(frozen=True)
class CommitStats:
    """What one ``commit`` did."""

    kept_slots: tuple[int, ...]
    freed_slots: tuple[int, ...]
    freed_blocks: tuple[int, ...]


@dataclass
class _StepLog:
    """Slots one cache wrote and freed since ``RequestKV.begin_step`` (a slot freed and written
    again in the same step counts as written)."""

    blocks_before: int = 0
    active: bool = False
    written: list[int] = field(default_factory=list)
    freed_slots: list[int] = field(default_factory=list)
    freed_blocks: list[int] = field(default_factory=list)

    def wrote(self, slots: list[int]) -> None:
        if self.active:
            self.written += slots
            reused = set(slots)
            self.freed_slots = [s for s in self.freed_slots if s not in reused]

    def freed(self, slots: list[int], blocks: tuple[int, ...]) -> None:
        if self.active:
            self.freed_slots += slots
            self.freed_blocks += blocks


@dataclass(frozen=True)
class SlotLayout:
    """What one slot of a pool holds: K and V, ``num_kv_heads`` x ``head_dim`` each, in each of
    ``num_layers`` layers."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    dtype: torch.dtype = torch.float32
    device: torch.device | str = "cpu"


class PagedKVCache:
    """The K/V pool of one model: one slot tensor per layer and one block pool."""

    def __init__(self, layout: SlotLayout, num_blocks: int, block_size: int = 16):
        self.pool = BlockPool(num_blocks, block_size)
        self.block_size = block_size
        num_slots = num_blocks * block_size
        shape = (num_slots, layout.num_kv_heads, layout.head_dim)  # [slots, kv heads, head_dim] per layer
        self.keys = [torch.zeros(shape, dtype=layout.dtype, device=layout.device) for _ in range(layout.num_layers)]
        self.values = [torch.zeros(shape, dtype=layout.dtype, device=layout.device) for _ in range(layout.num_layers)]
        self.num_layers = layout.num_layers
        self.device = torch.device(layout.device)

    @classmethod
    def for_model(cls, model, num_blocks: int, block_size: int = 16) -> "PagedKVCache":
        config = model.config.get_text_config()
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        num_kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        layout = SlotLayout(num_layers=config.num_hidden_layers, num_kv_heads=num_kv_heads, head_dim=head_dim,
                            dtype=model.dtype, device=model.device)
        return cls(layout, num_blocks, block_size)

    @property
    def block_bytes(self) -> int:
        """Bytes one block takes: keys and values of ``block_size`` tokens in every layer."""
        per_slot = self.keys[0][0].numel() * self.keys[0].element_size()
        return 2 * self.num_layers * self.block_size * per_slot

    def new_request(self) -> "RequestKV":
        return RequestKV(self)


class RequestKV:
    """One request's view of a ``PagedKVCache``: block table, slot mapping, pending tree slots."""

    def __init__(self, cache: PagedKVCache):
        self.cache = cache
        self.block_size = cache.block_size
        self.block_table: list[int] = []
        self.committed: list[int] = []  # slot of each committed token, in sequence order
        self.pending: list[int] = []  # slots written during the current step, in write order
        self._live = {}  # block id -> number of committed or pending slots in it
        self._free_slots: list[int] = []  # min-heap of unused slots inside owned blocks
        self.counters = KVCounters()
        self._forward = PagedForward(cache)
        self._step = _StepLog()

    # ---- bookkeeping -------------------------------------------------------------------
    def allocate(self, n: int) -> list[int]:
        """Reserve ``n`` slots (holes in owned blocks first, then fresh blocks)."""
        slots = []
        while len(slots) < n:
            if not self._free_slots:
                block = self.cache.pool.allocate()
                self.block_table.append(block)
                self._live[block] = 0
                self.counters.blocks_allocated += 1
                base = block * self.block_size
                for s in range(base, base + self.block_size):
                    heapq.heappush(self._free_slots, s)
            slot = heapq.heappop(self._free_slots)
            self._live[slot // self.block_size] += 1
            slots.append(slot)
        self.counters.peak_blocks_in_use = max(self.counters.peak_blocks_in_use, len(self.block_table))
        return slots

    def begin_forward(self, new_slots: list[int]) -> Cache:
        """Prepare a forward whose new tokens go to ``new_slots``; returns the transformers Cache.

        The new slots join ``pending``; attention then sees committed + pending K/V in that order
        (the engine's mask decides which of them each new token may attend to).
        """
        return self._forward.begin([self], [new_slots])

    def commit(self, keep: list[int]) -> CommitStats:
        """Keep ``pending[i]`` for i in ``keep`` (in that order, appended to the sequence); free the rest."""
        kept = [self.pending[i] for i in keep]
        if len(set(keep)) != len(keep):
            raise ValueError("commit: duplicate pending index")
        kept_set = set(kept)
        dropped = [s for s in self.pending if s not in kept_set]
        self.committed.extend(kept)
        self.pending = []
        freed_blocks = self._release_slots(dropped, count_as_freed=True)
        self._step.freed(dropped, freed_blocks)
        return CommitStats(kept_slots=tuple(kept), freed_slots=tuple(dropped), freed_blocks=freed_blocks)

    def release_all(self) -> None:
        """Return every block to the pool (end of run, error or cancel)."""
        for block in self.block_table:
            self.cache.pool.release(block)
        self.block_table = []
        self.committed = []
        self.pending = []
        self._live = {}
        self._free_slots = []

    def _release_slots(self, slots: list[int], count_as_freed: bool) -> tuple[int, ...]:
        freed_blocks = []
        for slot in slots:
            block = slot // self.block_size
            self._live[block] -= 1
            heapq.heappush(self._free_slots, slot)
        if count_as_freed:
            self.counters.slots_freed += len(slots)
        for block in sorted({s // self.block_size for s in slots}):
            if self._live[block] == 0:
                self.block_table.remove(block)
                del self._live[block]
                self._free_slots = [s for s in self._free_slots if s // self.block_size != block]
                heapq.heapify(self._free_slots)
                self.cache.pool.release(block)
                freed_blocks.append(block)
        if count_as_freed:
            self.counters.blocks_freed += len(freed_blocks)
        return tuple(freed_blocks)

    def begin_step(self) -> None:
        """Start logging what this cache does until ``step_record``: slots written, slots and blocks freed."""
        self._step = _StepLog(blocks_before=len(self.block_table), active=True)

    def step_record(self) -> KVStepRecord | None:
        """What this cache did since ``begin_step`` (written, kept, freed), as the engine records the
        target's KV per step; None if ``begin_step`` was not called."""
        log = self._step
        if not log.active:
            return None
        return KVStepRecord(
            blocks_before=log.blocks_before,
            blocks_after=len(self.block_table),
            slots_written=len(log.written),
            slots_freed=len(log.freed_slots),
            freed_blocks=list(log.freed_blocks),
            block_table=list(self.block_table),
            slot_grid={str(b): g for b, g in self.slot_states(log.written, log.freed_slots).items()},
            pool_in_use=self.cache.pool.blocks_in_use,
        )

    def summary(self) -> dict[str, int]:
        """Run counters in the shape of the ``kv`` field of the generate JSON."""
        return {
            "block_size": self.block_size,
            "blocks_total": self.cache.pool.num_blocks,
            **asdict(self.counters),
            "blocks_in_use_after": self.cache.pool.blocks_in_use,
        }

    def slot_states(self, written_this_step: list[int], freed_this_step: list[int]) -> dict[int, str]:
        """Per owned-or-just-freed block, one character per slot.

        ``L`` live before this step, ``W`` written this step and kept, ``F`` written this step and
        freed, ``.`` free.
        """
        committed = set(self.committed)
        written = set(written_this_step)
        freed = set(freed_this_step)
        blocks = sorted(set(self.block_table) | {s // self.block_size for s in freed})
        grid = {}
        for block in blocks:
            chars = []
            for slot in range(block * self.block_size, (block + 1) * self.block_size):
                if slot in freed:
                    chars.append("F")
                elif slot in written and slot in committed:
                    chars.append("W")
                elif slot in committed:
                    chars.append("L")
                else:
                    chars.append(".")
            grid[block] = "".join(chars)
        return grid


class PagedForward:
    """One forward over the new tokens of one or more requests of a ``PagedKVCache``, as
    transformers' Cache: the model's attention layers write the new K/V into the requests'
    slots and read back each request's cached K/V, padded to the longest.

    Row ``b`` of the batch is ``requests[b]``: its new tokens are the first ``len(new_slots[b])``
    query rows (the rest is padding, never written), its keys are its committed + pending
    slots followed by padding (the caller's mask hides padding columns).
    """

    def __init__(self, cache: PagedKVCache):
        self.cache = cache
        self.hf_cache = Cache(layers=[_PagedLayer(self, i) for i in range(cache.num_layers)])
        self.write_index: torch.Tensor | None = None  # [n_new_total] slot of each real new row
        self.write_rows: torch.Tensor | None = None  # [n_new_total] its row in [batch * n_query]; None: all rows
        self.gather_index: torch.Tensor | None = None  # [batch, kv_length] slots each row attends over
        self.past_length = 0  # kv_length - n_query

    def begin(self, requests: list["RequestKV"], new_slots: list[list[int]]) -> Cache:
        """The new slots join each request's ``pending``; returns the Cache for this forward."""
        n_query = max(len(s) for s in new_slots)
        gathers, write, rows = [], [], []
        for b, (request, slots) in enumerate(zip(requests, new_slots)):
            request.pending.extend(slots)
            request.counters.slots_written += len(slots)
            request._step.wrote(slots)
            gathers.append(request.committed + request.pending)
            write += slots
            rows += range(b * n_query, b * n_query + len(slots))
        kv_length = max(len(g) for g in gathers)
        device = self.cache.device
        self.write_index = torch.tensor(write, dtype=torch.long, device=device)
        padded = len(rows) < len(requests) * n_query
        self.write_rows = torch.tensor(rows, dtype=torch.long, device=device) if padded else None
        self.gather_index = torch.tensor([g + g[:1] * (kv_length - len(g)) for g in gathers], dtype=torch.long,
                                         device=device)
        self.past_length = kv_length - n_query
        return self.hf_cache

    def write_and_gather(self, layer: int, key_states: torch.Tensor, value_states: torch.Tensor):
        # key_states, value_states: [batch, num_kv_heads, n_query, head_dim]
        return (self._write_and_gather(self.cache.keys[layer], key_states),
                self._write_and_gather(self.cache.values[layer], value_states))

    def _write_and_gather(self, pool: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        batch, heads, n_query, head_dim = states.shape
        new = states.transpose(1, 2).reshape(batch * n_query, heads, head_dim)
        if self.write_rows is not None:
            new = new.index_select(0, self.write_rows)
        pool.index_copy_(0, self.write_index, new.to(pool.dtype))
        kv_length = self.gather_index.shape[1]
        # gathered: [batch, num_kv_heads, kv_length, head_dim]
        return pool.index_select(0, self.gather_index.view(-1)).view(batch, kv_length, heads, head_dim).transpose(1, 2)


class _PagedLayer(CacheLayerMixin):
    """transformers' per-layer cache API, backed by the requests' slots in the shared pool."""

    is_sliding = False

    def __init__(self, forward: PagedForward, layer_idx: int):
        super().__init__()
        self.forward = forward
        self.layer_idx = layer_idx
        self.is_initialized = True

    def lazy_initialization(self, key_states, value_states) -> None:  # pool is preallocated
        return None

    def update(self, key_states, value_states, *args, **kwargs):
        return self.forward.write_and_gather(self.layer_idx, key_states, value_states)

    def get_mask_sizes(self, query_length: int, *args, **kwargs) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_seq_length(self) -> int:
        """Keys before the forward in progress's queries (the longest request's, in a batch)."""
        return self.forward.past_length

    def get_max_length(self) -> int:
        return -1
