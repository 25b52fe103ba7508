"""The paged KV cache: block table, slot release, blocks back to the pool."""
import pytest

from core.common.errors import KVCacheFull
from core.runtime.kv_cache import BlockPool, PagedKVCache, SlotLayout


def make_request(num_blocks=6, block_size=4):
    cache = PagedKVCache(SlotLayout(num_layers=1, num_kv_heads=1, head_dim=2), num_blocks=num_blocks,
                         block_size=block_size)
    return cache, cache.new_request()


def write(kv, n):
    slots = kv.allocate(n)
    kv.begin_forward(slots)
    return slots


def test_block_pool_free_list_and_exhaustion():
    pool = BlockPool(2, 4)
    a, b = pool.allocate(), pool.allocate()
    assert (a, b) == (0, 1) and pool.blocks_in_use == 2
    with pytest.raises(KVCacheFull):
        pool.allocate()
    pool.release(a)
    assert pool.allocate() == a


def test_rejected_tree_spilling_into_a_fresh_block_returns_it():
    # the worked example of core/runtime/kv_cache.py
    cache, kv = make_request()
    write(kv, 6)
    kv.commit(list(range(6)))
    assert kv.block_table == [0, 1] and kv.committed == [0, 1, 2, 3, 4, 5]
    assert write(kv, 3) == [6, 7, 8]  # slot 8 opens block 2
    assert kv.block_table == [0, 1, 2]
    grid_written = [6, 7, 8]
    stats = kv.commit([0])  # accept the first node only
    assert kv.committed == [0, 1, 2, 3, 4, 5, 6]
    assert stats.freed_slots == (7, 8) and stats.freed_blocks == (2,)
    assert kv.block_table == [0, 1] and cache.pool.blocks_in_use == 2
    assert kv.counters.blocks_freed == 1 and kv.counters.slots_freed == 2
    grid = kv.slot_states(grid_written, list(stats.freed_slots))
    assert grid == {0: "LLLL", 1: "LLWF", 2: "F..."}


def test_holes_are_reused_before_new_blocks():
    cache, kv = make_request()
    write(kv, 6)
    kv.commit([0, 2, 4])  # keep slots 0, 2, 4: holes at 1, 3, 5
    assert kv.committed == [0, 2, 4]
    assert write(kv, 4) == [1, 3, 5, 6]
    assert kv.block_table == [0, 1]


def test_release_all_returns_everything():
    cache, kv = make_request()
    write(kv, 10)
    kv.commit(list(range(7)))
    write(kv, 2)
    kv.release_all()
    assert cache.pool.blocks_in_use == 0 and kv.block_table == [] and kv.committed == []
    assert kv.summary()["blocks_in_use_after"] == 0


def test_pool_exhaustion_is_a_clear_error_and_leaks_nothing():
    cache, kv = make_request(num_blocks=2, block_size=4)
    with pytest.raises(KVCacheFull, match="all 2 blocks"):
        kv.allocate(9)
    kv.release_all()
    assert cache.pool.blocks_in_use == 0
