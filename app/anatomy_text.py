"""The words of the drafter-anatomy panel (``app/figures/anatomy*.py``), in Chinese and English; ``app.i18n``
merges them into its table, so they are read with ``t`` like every other text of the page."""
from __future__ import annotations

ANATOMY_TEXT: dict[str, tuple[str, str]] = {
    "panel.anatomy": ("草稿器的内部（这一步）", "Inside the drafter (this step)"),
    "anat.draft": ("`draft` 是一个完整的小语言模型，自己一个 token 一个 token 往下写：没有额外的结构可画，它的猜测就是上面的草稿树。",
                   "`draft` is a whole small language model writing one token after another: there is no extra "
                   "part to draw; its guesses are the draft tree above."),
    "anat.ngram": ("`ngram` 不做任何计算：它在已有文本里找与结尾相同的片段，把后面跟着的 token 照抄过来。没有网络，所以没有内部结构可画。",
                   "`ngram` computes nothing: it finds where the text's last tokens occurred before and copies what "
                   "followed. There is no network, so nothing inside to draw."),
    "anat.nothing": ("这一步没有起草，草稿器内部没有可画的东西。", "This step drafted nothing: there is nothing inside "
                     "the drafter to draw."),
    "anat.none_drafted": ("这一步没有起草。", "This step drafted nothing."),
    "anat.medusa": ("**Medusa**：{heads} 个解码头都读目标模型在根位置的最后一层隐藏状态，一次计算同时给出每个深度的候选；"
                    "静态的树形状决定从每个头的候选里取哪几名。",
                    "**Medusa**: {heads} decoding heads all read the target's last hidden state at the root and give "
                    "candidates for every depth in one pass; the static tree shape says which ranks of each head's "
                    "candidates become nodes."),
    "anat.eagle": ("**EAGLE**：一个小网络读（目标特征，下一个 token）对，自己往前滚；EAGLE-2 在每一层按累计置信度只扩展最好的几个。",
                   "**EAGLE**: a small network reads (target feature, next token) pairs and rolls itself forward; "
                   "EAGLE-2 expands only the most confident few at each depth."),
    "anat.eagle3": ("**EAGLE-3**：和 EAGLE 一样滚动起草，但它读的是目标模型低、中、高三层的融合特征，并且训练时就在自己的输出上展开"
                    "（训练时测试）。",
                    "**EAGLE-3**: drafts by rolling forward like EAGLE, but reads a fusion of the target's low, middle "
                    "and high layers, and was trained unrolled on its own outputs (training-time test)."),
    "anat.peagle": ("**P-EAGLE**：EAGLE-3 的网络，但一次前向就给出整步的所有深度（后面的位置用学到的占位输入代替自己的输出），"
                    "所以没有逐层滚动的图；下面是它这一步打过分的候选。",
                    "**P-EAGLE**: EAGLE-3's network drafting every depth of the step in one forward (learned "
                    "placeholders stand in for its own outputs), so there is no rolling to draw; below are the "
                    "candidates it scored this step."),
    "anat.hybrid": ("**hybrid**：n-gram 查找和 {feature} 各提一部分，合成一棵验证树；两者都提出的节点只保留一次。",
                    "**hybrid**: n-gram lookup and {feature} each propose part of one verify tree; a node both "
                    "propose is kept once."),
    # Medusa
    "anat.medusa_title": ("第 {step} 步：Medusa 各头的候选和切出的树", "Step {step}: Medusa's heads, the tree cut"),
    "anat.head_tick": ("头 {i}", "head {i}"),
    "anat.rank_tick": ("第 {r} 名", "rank {r}"),
    "anat.cell_accepted": ("成为节点，被接受", "became a node, accepted"),
    "anat.cell_rejected": ("成为节点，被拒绝", "became a node, rejected"),
    "anat.cell_not_reached": ("成为节点，未检查", "became a node, not reached"),
    "anat.cell_outside": ("没有成为节点", "became no node"),
    "anat.cell_hover": ("头 %{customdata[0]} 的第 %{customdata[1]} 名：%{text}<br>成为 %{customdata[2]} 个树节点",
                        "head %{customdata[0]}, rank %{customdata[1]}: %{text}<br>became %{customdata[2]} tree nodes"),
    "anat.head_part": ("头 {i}（深度 {i}，最可能是 “{token}” {prob:.2f}）取了第 {ranks} 名，共 {nodes} 个节点",
                       "head {i} (depth {i}, most likely “{token}” {prob:.2f}) gave ranks {ranks}, {nodes} nodes"),
    "anat.medusa_caption": ("每一列是一个头在这一步的前几名 token 和概率。{parts}。树一共 {nodes} 个节点；连线就是树的边："
                            "所有头读的是同一个隐藏状态，所以深度 2 的节点不管挂在哪个父节点下，都取自头 2 的同一列。",
                            "Each column is one head's top tokens and probabilities at this step. {parts}. The tree "
                            "has {nodes} nodes; the lines are its edges: every head reads the same hidden state, so "
                            "a depth-2 node comes from head 2's column whatever its parent."),
    "anat.below_top": ("另有 {n} 个节点是按概率抽样得到的、不在各头的前几名里，图中没有画出。",
                       "{n} more nodes were drawn by sampling from below the heads' top tokens and are not drawn."),
    # EAGLE-2's expansion
    "anat.expansion_title": ("第 {step} 步：EAGLE-2 逐层打分的候选", "Step {step}: what EAGLE-2 scored"),
    "anat.pruned": ("打过分、被剪掉", "scored, pruned"),
    "anat.fed": ("再送入草稿器（每层前 k 名）", "fed again (top k a depth)"),
    "anat.cand_hover": ("%{hovertext}：深度 %{customdata[0]}，条件概率 %{customdata[1]:.3f}，累计置信度 %{customdata[2]:.4f}",
                        "%{hovertext}: depth %{customdata[0]}, probability given its parent %{customdata[1]:.3f}, "
                        "cumulative confidence %{customdata[2]:.4f}"),
    "anat.depth_part": ("深度 {d}：打分 {scored} 个，扩展 {fed} 个，保留 {kept} 个",
                        "depth {d}: {scored} scored, {fed} expanded, {kept} kept"),
    "anat.expansion_caption": ("纵轴是累计置信度（沿路径的草稿概率之积，对数刻度）。{parts}。一共打分 {scored} 个，按置信度保留 {kept} "
                               "个送去一次验证（保留的节点的父节点也一定保留）；淡色的是被剪掉的。",
                               "The vertical axis is the cumulative confidence (the product of draft probabilities "
                               "along the path, log scale). {parts}. {scored} scored in all; the {kept} most "
                               "confident were kept for the one verify (a kept node's parent is always kept); the "
                               "faded ones were pruned."),
    # EAGLE / EAGLE-3's fusion
    "anat.fusion_title": ("第 {step} 步：{drafter} 读的目标层", "Step {step}: the layers {drafter} reads"),
    "anat.layer_low": ("低", "low"),
    "anat.layer_middle": ("中", "middle"),
    "anat.layer_high": ("高", "high"),
    "anat.layer_last": ("最后一层", "last"),
    "anat.layer_read": ("读取", "read"),
    "anat.layer_unread": ("目标层（未读取）", "target layer (not read)"),
    "anat.layer_legend": ("草稿器读取的目标层", "target layer the drafter reads"),
    "anat.fuse3": ("融合 3H→H", "fuse 3H→H"),
    "anat.fuse1": ("特征 f", "feature f"),
    "anat.feature_true": ("目标模型的真实特征", "the target's true feature"),
    "anat.drafter_pass": ("草稿器一次前向", "one drafter pass"),
    "anat.guess": ("最后猜出的 token", "the last token guessed"),
    "anat.row_drafter": ("草稿器", "drafter"),
    "anat.row_fuse": ("特征", "feature"),
    "anat.row_target": ("目标模型 0–{n} 层", "target layers 0–{n}"),
    "anat.vocab_all": ("草稿头对整个词表（{vocab:,} 个 token）打分", "its head scores the whole vocabulary ({vocab:,} tokens)"),
    "anat.vocab_part": ("草稿头只对 {draft:,} 个 token 打分（目标词表 {vocab:,} 个的 {share:.1%}）",
                        "its head scores only {draft:,} tokens ({share:.1%} of the target's {vocab:,})"),
    "anat.fusion_caption": ("{drafter} 读目标模型 {n} 层中的第 {layers} 层（0 是词嵌入）；{vocab}。第一次前向读目标的真实特征和根 "
                            "token，之后每次读自己上一步猜出的特征（虚线）和刚猜出的 token：这一步打分最高的那条链。",
                            "{drafter} reads layers {layers} of the target's {n} (0 is the embeddings); {vocab}. Its "
                            "first pass reads the target's true feature and the root token, every later one its own "
                            "feature guessed the pass before (dotted) and the token just guessed: here along this "
                            "step's most confident chain."),
    # the training-time test
    "anat.ttt_title": ("训练时测试", "Training-time test"),
    "anat.ttt_plan": ("展开 {n} 步，每步读入的特征", "the feature read, {n} steps unrolled"),
    "anat.ttt_measured": ("实测：{preset}，k=5 的链", "measured: {preset}, a k=5 chain"),
    "anat.tf_row": ("教师强制", "teacher forcing"),
    "anat.ttt_row": ("训练时测试", "training-time test"),
    "anat.ttt_step": ("第 {j} 步", "step {j}"),
    "anat.ttt_true": ("f：目标模型的真实特征", "f: the target's true feature"),
    "anat.ttt_own": ("f̂：草稿器自己上一步猜出的特征", "f̂: the feature the drafter guessed itself the step before"),
    "anat.head_none": ("头 {i} 这一步没有节点（树没有这么深）", "head {i} gave no node this step (the tree is not that deep)"),
    "anat.ttt_line": ("{preset} {folder}（训练展开 {n} 步）", "{preset} {folder} (trained unrolled {n} steps)"),
    "anat.accept_axis": ("该深度被接受的比例", "share accepted at that depth"),
    "anat.ttt_trained": ("这个草稿器训练时展开了 {n} 步。", "This drafter was trained unrolled over {n} steps."),
    "anat.ttt_unknown": ("这个草稿器的权重没有记录训练方式。", "This drafter's weights do not record how it was trained."),
    "anat.ttt_none": ("没有随项目提供“不做训练时测试”的对照草稿器，所以没有实测对比。",
                      "No drafter trained without the test ships for comparison, so there is no measurement."),
    "anat.ttt_caption": ("起草时，深度 2 以后草稿器读的都是自己猜的特征 f̂；只用教师强制训练，它从没见过 f̂。{preset} 上同一个草稿器"
                         "两种训练的实测（{prompts} 条留出提示词）：深度 {depth} 的接受比例 {a_with:.2f} 对 {a_without:.2f}，"
                         "τ {tau_with:.2f} 对 {tau_without:.2f}。",
                         "When drafting, from depth 2 on the drafter reads features it guessed itself (f̂); trained "
                         "with teacher forcing only, it never saw one. The same drafter on {preset} trained both ways "
                         "({prompts} held-out prompts): acceptance at depth {depth} {a_with:.2f} against "
                         "{a_without:.2f}, τ {tau_with:.2f} against {tau_without:.2f}."),
    "anat.ttt_other": ("{preset} 没有随项目提供不做训练时测试的 eagle3（eagle3-no-ttt），所以这里显示的是 {source} 的实测，"
                       "不是这次运行的模型。",
                       "No eagle3 trained without the test (eagle3-no-ttt) ships for {preset}: the numbers shown are "
                       "{source}'s, not this run's model's."),
    # hybrid
    "anat.hybrid_title": ("第 {step} 步：每个分支由谁提出", "Step {step}: who proposed each branch"),
    "anat.branch_legend": ("{who}：{n} 个节点，接受 {a} 个", "{who}: {n} nodes, {a} accepted"),
    "anat.branch_part": ("{who} 提出 {n} 个，接受 {a} 个", "{who} proposed {n}, {a} accepted"),
    "anat.hybrid_caption": ("节点的填充色是提出者（深色：两者都提出了同一个 token），边框是验证结果。{parts}。",
                            "A node's fill is who proposed it (dark: both proposed the same token), its outline the "
                            "verdict. {parts}."),
}
