"""Tree masks and positions on hand-written trees, and tree-verify logits vs plain sequences."""
import torch

from core.runtime.forward import chain_parents, forward_segment
from core.runtime.kv_cache import PagedKVCache
from core.runtime.tree import DraftTree, ancestor_matrix, attention_mask, node_depths, position_ids, with_root


def test_depths_and_ancestors_of_a_hand_written_tree():
    #        root
    #       /    \
    #      0      1
    #     / \     |
    #    2   3    4
    parents = [-1, -1, 0, 0, 1]
    assert node_depths(parents) == [1, 1, 2, 2, 2]
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [0, 1, 0, 0, 0],
            [1, 0, 1, 0, 0],
            [1, 0, 0, 1, 0],
            [0, 1, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(ancestor_matrix(parents), expected)


def test_verify_mask_and_positions_with_root_and_prefix():
    # the docstring example of core/runtime/tree.py: root, 爱(0), 是(1), 中(2) under 爱
    segment = with_root([-1, -1, 0])
    assert segment == [-1, 0, 0, 1]
    mask = attention_mask(n_prefix=3, parents=segment, n_query=4)
    assert mask.shape == (1, 1, 4, 7)
    allowed = (mask[0, 0] == 0).int().tolist()
    assert allowed == [
        [1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 0, 1, 0],
        [1, 1, 1, 1, 1, 0, 1],
    ]
    assert position_ids(3, segment, 4).tolist() == [[3, 4, 4, 5]]


def test_mask_for_later_queries_of_a_segment():
    # a 3-level chain where the first two entries are already cached: only the last is queried
    mask = attention_mask(n_prefix=2, parents=[-1, 0, 1], n_query=1)
    assert (mask[0, 0] == 0).int().tolist() == [[1, 1, 1, 1, 1]]
    # two siblings queried after their parent was cached: each sees the parent, not the other
    mask = attention_mask(n_prefix=1, parents=[-1, 0, 0], n_query=2)
    assert (mask[0, 0] == 0).int().tolist() == [[1, 1, 1, 0], [1, 1, 0, 1]]
    assert position_ids(1, [-1, 0, 0], 2).tolist() == [[2, 2]]


def test_a_plain_steps_lone_token_sees_every_key():
    """A one-entry segment (a plain step, the first catch-up token) takes the short way: one zero
    row over prefix + itself, in the asked dtype -- what the general construction gives."""
    import torch

    for n_prefix in (0, 7):
        mask = attention_mask(n_prefix=n_prefix, parents=[-1], n_query=1, dtype=torch.bfloat16)
        assert mask.shape == (1, 1, 1, n_prefix + 1) and mask.dtype == torch.bfloat16 and not mask.any()


def test_draft_tree_paths_and_children():
    tree = DraftTree()
    a = tree.add(10, -1, 0.5)
    b = tree.add(11, -1, 0.3)
    c = tree.add(12, a, 0.9)
    assert tree.children(-1) == [a, b]
    assert tree.children(a) == [c]
    assert tree.path_to(c) == [a, c]
    assert tree.depths == [1, 1, 2]


def test_tree_verify_logits_equal_each_path_run_as_a_sequence(random_llama):
    model = random_llama
    prompt = [5, 17, 42, 8, 33]
    tree_tokens = [60, 61, 62, 63, 64]
    tree_parents = [-1, -1, 0, 0, 2]  # paths: 60-62-64, 60-63, 61
    kv = PagedKVCache.for_model(model, num_blocks=8, block_size=4).new_request()
    forward_segment(model, kv, prompt[:-1], chain_parents(len(prompt) - 1))
    kv.commit(list(range(len(prompt) - 1)))
    root = prompt[-1]
    tree_logits = forward_segment(model, kv, [root] + tree_tokens, with_root(tree_parents))

    tree = DraftTree(tokens=tree_tokens, parents=tree_parents)
    for node in range(len(tree_tokens)):
        path = [tree_tokens[i] for i in tree.path_to(node)]
        with torch.inference_mode():
            plain = model(torch.tensor([prompt + path])).logits[0, -1]
        torch.testing.assert_close(tree_logits[node + 1], plain, atol=1e-5, rtol=1e-5)
    with torch.inference_mode():
        plain_root = model(torch.tensor([prompt])).logits[0, -1]
    torch.testing.assert_close(tree_logits[0], plain_root, atol=1e-5, rtol=1e-5)


def test_decode_after_keeping_non_contiguous_slots_matches_plain_model(random_llama):
    """Commit keeps only the accepted path's slots; the next step must see exactly that sequence."""
    model = random_llama
    prompt = [3, 9, 27, 81]
    kv = PagedKVCache.for_model(model, num_blocks=8, block_size=4).new_request()
    forward_segment(model, kv, prompt[:-1], chain_parents(3))
    kv.commit([0, 1, 2])
    # tree: 50 and 51 under the root, 52 under 51; accept 51 -> 52
    forward_segment(model, kv, [prompt[-1], 50, 51, 52], with_root([-1, -1, 1]))
    kv.commit([0, 2, 3])
    next_logits = forward_segment(model, kv, [70], [-1])
    with torch.inference_mode():
        plain = model(torch.tensor([prompt + [51, 52, 70]])).logits[0, -1]
    torch.testing.assert_close(next_logits[0], plain, atol=1e-5, rtol=1e-5)
