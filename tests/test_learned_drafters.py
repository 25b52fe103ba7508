"""Medusa, EAGLE and EAGLE-3 drafters: lossless through the engine, leak-free, and their parts.

The end-to-end tests use the tiny target with the heads shipped next to it (assets/tiny/medusa,
eagle, eagle3); the unit tests use hand-written logits or small random networks.
"""
import copy
import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TINY
from prompts import LOSSLESS_PROMPTS
from safetensors.torch import load_file, save_file
from sampling_law import binned, exact_joint
from scipy.stats import chisquare

from core.drafters.base import DraftShape, pick_children
from core.drafters.eagle import Eagle3Drafter, EagleDrafter, Expansion, prune
from core.drafters.eagle_net import FeatureDrafterConfig, FeatureDrafterNet, run_segment
from core.drafters.medusa import MedusaDrafter, build_tree, choices_for_shape, parse_choices
from core.drafters.vocab import Columns, ContextColumns, draft_rows, to_target_vocab
from core.engine.decoder import DecodeSettings, SpeculativeDecoder
from core.common.errors import UserError
from core.models.loading import LoadedModel
from core.runtime.kv_cache import PagedKVCache, SlotLayout
from core.train.eagle import new_net, unroll, unroll_mask
from core.train.features import draftable_cross_entropy
from core.train.gemma_drafters import start_from
from core.train.medusa import sparse_tree
from core.train.vocab_coverage import coverage


MAX_NEW = 32
DRAFTERS = {
    "medusa k=4": lambda t, **kw: MedusaDrafter(DraftShape(1, 4), t, **kw),
    "medusa tuned tree": lambda t, **kw: MedusaDrafter(DraftShape(1, 4), t, medusa_choices="tuned", **kw),
    "eagle k=5": lambda t, **kw: EagleDrafter(DraftShape(1, 5), t, **kw),
    "eagle tree 4x5 N=24": lambda t, **kw: EagleDrafter(DraftShape(4, 5), t, eagle_nodes=24, **kw),
    "eagle3 k=5": lambda t, **kw: Eagle3Drafter(DraftShape(1, 5), t, **kw),
    "eagle3 tree 3x4 N=16": lambda t, **kw: Eagle3Drafter(DraftShape(3, 4), t, eagle_nodes=16, **kw),
}


def decode(target, drafter, ids, max_new=MAX_NEW, temperature=0.0, seed=0, block_size=16):
    settings = DecodeSettings(max_new_tokens=max_new, temperature=temperature, seed=seed, block_size=block_size)
    decoder = SpeculativeDecoder(target, drafter, settings, {"prompt": "", "preset": "tiny", "drafter": drafter.name,
                                                            "settings": {}})
    for _ in decoder.steps(ids):
        pass
    return decoder.result


@pytest.fixture(scope="module")
def target(tiny):
    return tiny[0]


# ---- lossless and leak-free through the engine ------------------------------------------------
@pytest.mark.parametrize("label", list(DRAFTERS))
def test_greedy_output_is_the_target_alone(label, target, baselines):
    assert len(LOSSLESS_PROMPTS) >= 20
    accepted = 0
    for prompt, (ids, expected) in baselines.items():
        result = decode(target, DRAFTERS[label](target), ids)
        assert result.tokens == expected, f"{label} diverged on {prompt!r}"
        assert result.kv["blocks_in_use_after"] == 0
        if result.draft_kv is not None:
            assert result.draft_kv["blocks_in_use_after"] == 0
        accepted += result.draft_tokens_accepted
    assert accepted > 0, f"{label} never had a token accepted"


@pytest.mark.parametrize("label", ["eagle tree 4x5 N=24", "eagle3 k=5"])
def test_tiny_blocks_spill_and_stay_lossless(label, target, baselines):
    """Block size 2: the drafter's own cache spills into fresh blocks at every step."""
    for prompt in LOSSLESS_PROMPTS[:6]:
        ids, expected = baselines[prompt]
        result = decode(target, DRAFTERS[label](target, block_size=2), ids, block_size=2)
        assert result.tokens == expected
        assert result.draft_kv["blocks_in_use_after"] == 0
        assert result.draft_kv["blocks_freed"] > 0


def test_a_cancelled_run_returns_the_drafters_blocks(target):
    drafter = DRAFTERS["eagle tree 4x5 N=24"](target)
    decoder = SpeculativeDecoder(target, drafter, DecodeSettings(max_new_tokens=40), {
        "prompt": "", "preset": "tiny", "drafter": "eagle", "settings": {}})
    steps = decoder.steps(target.tokenizer("我爱中国").input_ids)
    next(steps)
    next(steps)
    assert drafter.kv_summary()["blocks_in_use_after"] > 0
    steps.close()
    assert drafter.kv_summary()["blocks_in_use_after"] == 0


N_SAMPLES = 600
TEMPERATURE = 0.8


@pytest.mark.parametrize("prompt,label", [  # trees at temperature > 0 by default: test_sampling's hybrid
    pytest.param("《静夜思》\n作者：李白\n", "medusa tuned tree", marks=pytest.mark.slow),
    pytest.param("It is a truth", "eagle tree 4x5 N=24", marks=pytest.mark.slow),
    ("In the beginning God created", "eagle3 k=5"),
])
def test_sampling_follows_the_target(prompt, label, target):
    """The first two tokens' joint law, binned, against the target's exact law (chi-square)."""
    ids = target.tokenizer(prompt).input_ids
    joint = exact_joint(target, ids, temperature=TEMPERATURE)
    counts, proposed = {}, 0
    drafter = DRAFTERS[label](target)  # one drafter for every run: ``start`` resets its per-run state
    for seed in range(N_SAMPLES):
        result = decode(target, drafter, ids, max_new=3, temperature=TEMPERATURE, seed=seed)
        key = (result.tokens[0], result.tokens[1] if len(result.tokens) > 1 else None)
        counts[key] = counts.get(key, 0) + 1
        proposed += result.draft_tokens_proposed
    observed, expected = binned(joint, counts, N_SAMPLES)
    assert len(observed) >= 3, "the test needs a spread-out distribution"
    assert chisquare(observed, expected).pvalue > 1e-3
    assert proposed > 0


# ---- what the records get -----------------------------------------------------------------------
def test_nodes_name_their_head_or_depth_and_the_expansion_is_kept(target):
    ids = target.tokenizer("床前明月光，").input_ids
    medusa = DRAFTERS["medusa tuned tree"](target)
    step = next(iter(SpeculativeDecoder(target, medusa, DecodeSettings(max_new_tokens=8), {
        "prompt": "", "preset": "tiny", "drafter": "medusa", "settings": {}}).steps(ids)))
    assert all(n.proposer == f"medusa-head{n.depth - 1}" for n in step.nodes)

    eagle = DRAFTERS["eagle tree 4x5 N=24"](target)
    decoder = SpeculativeDecoder(target, eagle, DecodeSettings(max_new_tokens=8), {
        "prompt": "", "preset": "tiny", "drafter": "eagle", "settings": {}})
    step = next(iter(decoder.steps(ids)))
    expansion = eagle.last_expansion
    assert all(n.proposer == f"eagle-d{n.depth}" for n in step.nodes)
    assert len(expansion.tokens) > len(step.nodes) == 24
    kept = [i for i, node in enumerate(expansion.kept_as) if node >= 0]
    assert sorted(expansion.kept_as[i] for i in kept) == list(range(24))
    for i in kept:
        node = step.nodes[expansion.kept_as[i]]
        assert node.token == expansion.tokens[i] and node.depth == expansion.depths[i]
        assert node.draft_prob == pytest.approx(expansion.probs[i], abs=1e-6)
    assert step.expansion.tokens == expansion.tokens and step.expansion.kept_as == expansion.kept_as
    assert len(step.expansion.texts) == len(expansion.tokens)


def test_weights_for_another_target_are_refused(random_llama):
    other = LoadedModel(str(TINY / "target"), random_llama, None, 256, frozenset())
    with pytest.raises(UserError, match="another target"):
        MedusaDrafter(DraftShape(1, 4), other)
    with pytest.raises(UserError, match="no trained eagle weights"):
        EagleDrafter(DraftShape(1, 4), other, weights="/nonexistent")


def test_a_weights_folder_is_prepared_once_and_again_when_its_files_change(target, tmp_path):
    """Drafters of one folder share its prepared module, whatever their shape (a request no longer
    pays the load and the fp16 packing); float32 products are another module; rewritten weights are
    read again, and a folder broken since is refused again."""
    folder = tmp_path / "eagle3"
    shutil.copytree(TINY / "eagle3", folder)
    first = Eagle3Drafter(DraftShape(1, 4), target, str(folder)).net
    assert Eagle3Drafter(DraftShape(3, 4), target, str(folder), eagle_nodes=16).net is first
    assert Eagle3Drafter(DraftShape(1, 4), target, str(folder), half_products=False).net is not first
    heads = MedusaDrafter(DraftShape(1, 4), target).heads
    assert MedusaDrafter(DraftShape(2, 2), target, medusa_choices="tuned").heads is heads

    weights = folder / "model.safetensors"
    state = load_file(weights)
    name = next(n for n, w in state.items() if w.is_floating_point())
    state[name] = state[name] + 1
    save_file(state, weights)
    changed = Eagle3Drafter(DraftShape(1, 4), target, str(folder)).net
    assert changed is not first
    assert torch.equal(changed.state_dict()[name], first.state_dict()[name] + 1)
    weights.write_bytes(b"not safetensors")
    with pytest.raises(UserError, match="not a safetensors file"):
        Eagle3Drafter(DraftShape(1, 4), target, str(folder))


# ---- Medusa's static tree -----------------------------------------------------------------------
def test_choices_are_sorted_and_validated():
    assert parse_choices("[[0, 0], [1], [0]]") == ((0,), (1,), (0, 0))
    assert choices_for_shape(DraftShape(2, 2), num_heads=4) == ((0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1))
    assert choices_for_shape(DraftShape(1, 6), num_heads=3) == ((0,), (0, 0), (0, 0, 0))
    for bad in ("[[0, 1]]", "[[]]", "nonsense", "[[-1]]"):
        with pytest.raises(UserError):
            parse_choices(bad)


def test_medusa_tree_takes_each_heads_ranks():
    head_logits = torch.log(torch.tensor([
        [0.1, 0.6, 0.3, 0.0],  # head 0 (depth 1): ranks 1, 2, 0
        [0.2, 0.1, 0.0, 0.7],  # head 1 (depth 2): ranks 3, 0, 1
    ]))
    tree = build_tree(parse_choices([[0], [1], [0, 0], [0, 1], [1, 0]]), head_logits, max_depth=4,
                      temperature=0.0, generator=torch.Generator())
    assert tree.tokens == [1, 2, 3, 0, 3]
    assert tree.parents == [-1, -1, 0, 0, 1]
    assert tree.proposer == ["medusa-head0", "medusa-head0", "medusa-head1", "medusa-head1", "medusa-head1"]
    shallow = build_tree(parse_choices([[0], [0, 0]]), head_logits, max_depth=1, temperature=0.0,
                         generator=torch.Generator())
    assert shallow.tokens == [1]


def test_sparse_tree_grows_the_most_probable_paths():
    accuracy = torch.tensor([[0.8, 0.1, 0.05], [0.5, 0.2, 0.1]])
    # worth: [0] .8, [0,0] .4, [0,1] .16, [1] .1, [0,2] .08, [1,0] .05 ...
    assert sparse_tree(accuracy, 4) == [[0], [1], [0, 0], [0, 1]]


# ---- EAGLE-2's dynamic tree -------------------------------------------------------------------
def test_prune_keeps_the_best_connected_nodes_parents_first():
    expansion = Expansion()
    a = expansion.add(10, -1, 1, 0.6, -0.5)
    b = expansion.add(11, -1, 1, 0.4, -0.9)
    c = expansion.add(12, a, 2, 1.0, -0.5)  # ties with its parent: the parent still comes first
    expansion.add(13, b, 2, 0.9, -1.0)
    e = expansion.add(14, c, 3, 0.5, -1.2)
    assert prune(expansion, 3) == [a, b, c]
    assert prune(expansion, 2) == [a, c]
    assert prune(expansion, 5)[-1] == e


# ---- training-time test == drafting ------------------------------------------------------------
def test_a_draft_vocabulary_maps_ids_to_rows_and_logits_back():
    vocab, inf = torch.tensor([2, 5]), float("inf")
    assert draft_rows(vocab, 6).tolist() == [-1, -1, 0, -1, -1, 1]
    assert draft_rows(vocab, 6, outside=2).tolist() == [2, 2, 0, 2, 2, 1]  # a draft model's "other" id
    assert draft_rows(None, 6) is None
    logits = torch.tensor([[1.0, 3.0, 7.0]])  # the last column: the "other" id, never proposed
    assert to_target_vocab(logits, vocab, 6).tolist() == [[-inf, -inf, 1.0, -inf, -inf, 3.0]]
    assert to_target_vocab(logits, None, 2).tolist() == [[1.0, 3.0]]  # same vocabulary, cut or padded
    assert to_target_vocab(logits, None, 4).tolist() == [[1.0, 3.0, 7.0, -inf]]


@pytest.mark.parametrize("draft_vocab", [torch.tensor([1, 4, 6, 9]), None])
def test_children_picked_from_a_drafters_own_columns_are_those_of_its_target_wide_logits(draft_vocab):
    """Ranking only the columns that score a target id (no target-wide -inf logits) proposes the same
    tokens with the same probabilities; a sampled child's law is still spread over the target's ids."""
    columns, generator = Columns(draft_vocab, 10), torch.Generator()
    logits = torch.tensor([0.5, 2.0, -1.0, 1.5, 0.1, 9.0])  # with a draft vocabulary the last column is "other"
    own, wide = columns.proposable(logits), to_target_vocab(logits, draft_vocab, 10)
    picked = pick_children(own, 3, 0.0, generator, columns)
    expected = pick_children(wide, 3, 0.0, generator)
    assert [t for t, _, _ in picked] == [t for t, _, _ in expected]
    assert [p for _, p, _ in picked] == pytest.approx([p for _, p, _ in expected], rel=1e-6)
    token, prob, law = pick_children(own, 1, 1.0, generator.manual_seed(0), columns)[0]
    wide_token, wide_prob, wide_law = pick_children(wide, 1, 1.0, generator.manual_seed(0))[0]
    assert (token, prob) == (wide_token, wide_prob) and torch.equal(law, wide_law) and len(law) == 10


def test_context_columns_add_the_requests_tokens_outside_the_draft_vocabulary():
    head = torch.randn(6, 3)
    context = ContextColumns(torch.tensor([2, 5]), head)
    context.read([1, 2, 4, 1])
    assert context.extra_ids.tolist() == [1, 4]
    assert context.columns.target_ids(torch.arange(4)).tolist() == [2, 5, 1, 4]
    out = torch.randn(2, 3)
    assert torch.allclose(context.logits(out), out @ head[[1, 4]].T)
    context.read([1, 2, 4, 1, 0, 5, 9])  # only the new tokens are read; 5 is in the draft vocabulary, 9 no id
    assert context.extra_ids.tolist() == [1, 4, 0]
    assert context.columns.to_target(torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])).tolist() == [
        5.0, 3.0, 1.0, -float("inf"), 4.0, 2.0]


def narrowed_eagle3(target, context_vocab):
    drafter = Eagle3Drafter(DraftShape(3, 4), target, eagle_nodes=16, draft_vocab_only=not context_vocab)
    drafter.net = net = copy.deepcopy(drafter.net)  # the shipped net is shared by every eagle3 drafter of tiny
    net.draft_vocab = net.draft_vocab[:64]
    net.head_weight, net.head_product = net.target_head[net.draft_vocab], None
    return drafter, net.draft_vocab


def narrowed_medusa(target, context_vocab):
    drafter = MedusaDrafter(DraftShape(2, 3), target, draft_vocab_only=not context_vocab)
    drafter.heads = heads = copy.deepcopy(drafter.heads)  # tiny's medusa scores the whole vocabulary: it takes eagle3's 64 ids
    heads.draft_vocab = narrowed_eagle3(target, context_vocab)[1]
    heads.shared_head, heads.head_products = heads.target_head[heads.draft_vocab], None
    return drafter, heads.draft_vocab


@pytest.mark.parametrize("context_vocab", [True, False])
@pytest.mark.parametrize("narrowed", [narrowed_eagle3, narrowed_medusa])
def test_drafters_propose_context_tokens_outside_their_draft_vocabulary_only_when_asked(narrowed, context_vocab,
                                                                                          target, baselines):
    """tiny's eagle3 and medusa scoring only 64 ids (eagle3's 1,024 hold every greedy token of these
    prompts, medusa scores all 8,000): with context columns they also propose ids of the request outside
    them (scored by the target's own head rows), and the output is still the target's."""
    outside = 0
    for prompt, (ids, expected) in list(baselines.items())[:6]:
        drafter, vocab = narrowed(target, context_vocab)
        inside = set(vocab.tolist())
        proposed = []
        propose = drafter.propose
        drafter.propose = lambda ctx: (tree := propose(ctx), proposed.extend(tree.tokens))[0]
        assert decode(target, drafter, ids).tokens == expected
        outside += sum(token not in inside for token in proposed)
    assert (outside > 0) == context_vocab


def test_coverage_is_the_share_of_tokens_a_draft_vocabulary_can_propose():
    counts = torch.tensor([5.0, 3.0, 1.0, 1.0])  # id 0 is chosen most, then 1
    held_out = torch.tensor([0, 1, 1, 3])
    assert coverage(counts, held_out, [1, 2]) == [(1, 0.5, 0.25), (2, pytest.approx(0.8), 0.75)]


def test_training_can_start_from_a_drafter_of_another_draft_vocabulary(target, tmp_path):
    folder = Path("assets/tiny/eagle3")
    shipped = Eagle3Drafter(DraftShape(1, 2), target, str(folder)).net
    wider = torch.arange(0, target.vocab_size, 2)[:2048]
    net = new_net(target.model, "eagle3", shipped.config.target_layers, shipped.config.intermediate_size, wider)
    start_from(net, folder, target)
    assert net.draft_vocab.tolist() == wider.tolist()  # its own vocabulary kept
    mine, theirs = net.state_dict(), shipped.state_dict()
    assert all(torch.equal(mine[name], theirs[name].float()) for name in theirs if name != "draft_vocab")
    with pytest.raises(UserError, match="not a drafter of this shape"):
        start_from(new_net(target.model, "eagle3", shipped.config.target_layers, 512, wider), folder, target)


def test_training_weighs_only_tokens_the_draft_vocabulary_holds():
    rows = draft_rows(torch.tensor([2, 5]), 6)
    logits = torch.tensor([[0.5, -1.0], [2.0, 1.0]])  # [positions, draft rows]
    ids = torch.tensor([[5, 3], [4, 2]])  # the target's top-2 per position; 3 and 4 are outside
    probs = torch.tensor([[0.6, 0.4], [0.7, 0.3]])
    loss = draftable_cross_entropy(logits, ids, probs, rows)
    # position 0 keeps only token 5 (draft row 1); position 1's greedy token (4) is outside: skipped
    assert loss == pytest.approx(float(-torch.log_softmax(logits[0], -1)[1]))


def test_unroll_mask_is_causal_then_diagonal():
    allowed = unroll_mask(3, 3)[0, 0] == 0
    assert allowed[:, :3].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert allowed[:, 3:6].tolist() == torch.eye(3, dtype=torch.bool).tolist()
    assert allowed[:, 6:].tolist() == torch.eye(3, dtype=torch.bool).tolist()


def test_decode_anchors_follow_a_greedy_decode():
    from core.train.eagle import decode_anchors

    hits = torch.tensor([[[1, 1, 0], [0, 0, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]],
                         [[0, 0, 0], [1, 0, 0], [0, 0, 0], [1, 1, 0], [1, 0, 0]]], dtype=torch.bool)
    # row 0 drafts at 0 (2 accepted + the target's token), then at 3; row 1 at 0, 1, 3
    expected = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0]]).float().mean(0)
    assert torch.equal(decode_anchors(hits), expected)


def test_training_unroll_equals_drafting_with_the_paged_cache():
    """Step j of the training unroll at anchor t is exactly what drafting depth j computes at inference."""
    torch.manual_seed(0)
    hidden = 32
    config = FeatureDrafterConfig((1, 2), hidden, 64, 4, 2, 128, output_norm=True)
    net = FeatureDrafterNet(config, torch.randn(50, hidden), torch.randn(50, hidden)).eval()
    tokens, features = torch.randint(0, 50, (1, 12)), torch.randn(1, 12, hidden)
    with torch.no_grad():
        outputs = unroll(net, features, tokens, 4)
        for t in (0, 3, 7):
            kv = PagedKVCache(SlotLayout(1, 2, hidden // 4), num_blocks=8, block_size=4).new_request()
            out = run_segment(net, kv, features[0, : t + 1], tokens[0, 1 : t + 2].tolist())[-1]
            kv.commit(list(range(t + 1)))
            torch.testing.assert_close(out, outputs[0][0, t])
            parents: list[int] = []
            for step in range(2, 5):
                parents.append(len(parents) - 1)
                out = run_segment(net, kv, out[None], [int(tokens[0, t + step])], parents)[-1]
                torch.testing.assert_close(out, outputs[step - 1][0, t], atol=1e-5, rtol=1e-5)


# ---- the command line and the API ---------------------------------------------------------------
def test_the_cli_runs_eagle3_with_its_tree_options_and_traces_the_expansion(tmp_path):
    from core import read_trace
    from test_cli import cli

    trace = tmp_path / "run.jsonl"
    proc = cli("generate", "--drafter", "eagle3", "--tree", "4x5", "--eagle-nodes", "24", "--prompt", "我爱",
               "--max-new-tokens", "24", "--check", "--json", "--trace", str(trace))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["baseline_match"] is True and data["settings"]["eagle_nodes"] == 24
    assert data["draft"].endswith("eagle3")
    step = read_trace(trace).steps[0]
    expansion = step.expansion
    assert len(step.nodes) == 24 < len(expansion.tokens) == len(expansion.texts)
    for i, node in enumerate(expansion.kept_as):
        if node >= 0:
            assert step.nodes[node].token == expansion.tokens[i]


@pytest.mark.parametrize("options,message", [
    (dict(drafter="ngram", draft_size="xs"), "--draft-size applies"),
    (dict(drafter="draft", draft_size="xxl"), "draft_size: Input should be 'xs', 's' or 'l'"),
    (dict(drafter="draft", draft_size="xs", draft="assets/tiny/draft"), "not both"),
    (dict(drafter="draft", drafter_weights="assets/tiny/eagle"), "--drafter-weights applies to --drafter medusa"),
    (dict(drafter="eagle", medusa_choices="tuned"), "--medusa-choices applies"),
    (dict(drafter="medusa", eagle_nodes=8), "--eagle-nodes applies"),
    (dict(drafter="eagle", eagle_nodes=500), "eagle_nodes: Input should be less than or equal to 128"),
    (dict(drafter="eagle", drafter_weights="assets/tiny/medusa"), "not 'eagle'"),
    (dict(drafter="medusa", medusa_choices="[[0], [0, 0], [0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0, 0]]"), "4 heads"),
])
def test_drafter_options_are_checked(options, message):
    from core.api import build_decoder
    from core.api.request import DecodeRequest

    with pytest.raises(UserError, match=message):
        build_decoder(DecodeRequest.of("我爱", "tiny", **options))


def test_each_draft_size_is_its_own_model():
    from core.api import build_decoder
    from core.api.request import DecodeRequest

    sizes = {}
    for size in ("xs", "s", "l"):
        decoder, _ = build_decoder(DecodeRequest.of("我爱", "tiny", "draft", draft_size=size))
        sizes[size] = sum(p.numel() for p in decoder.drafter.draft.model.parameters())
    assert sizes["xs"] < sizes["s"] < sizes["l"]
    by_name, _ = build_decoder(DecodeRequest.of("我爱", "tiny", "draft-l"))  # the name picks the size too
    assert by_name.drafter.model_path.endswith("draft-l") and by_name.run_info["settings"]["draft_size"] == "l"
    with pytest.raises(UserError, match="already sets --draft-size xs"):
        build_decoder(DecodeRequest.of("我爱", "tiny", "draft-xs", draft_size="l"))
