"""The one training loop every trainer runs: AdamW, linear warmup then cosine decay, gradient
clipping, optional bf16 autocast, progress on stderr, and (given a checkpoint path) a resumable run.

A trainer brings its own loss: ``loss_of(step)`` draws its batch (from a generator it seeded)
and returns the loss of that batch; the loop does the rest::

    generator = seeded(args.seed)                  # before the weights are initialised
    model = build(...)
    seconds = train(model, lambda step: my_loss(model, next(batches)), TrainConfig(steps=300), "name")

With ``checkpoint=`` the loop saves the weights, optimiser, schedule, step and the batch
generator's state every ``CHECKPOINT_EVERY`` steps; run again with the same checkpoint path, it
picks up where it stopped and ends with the weights an unbroken run would have.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from core.common.files import write_atomic

LOG_EVERY = 25  # steps between progress lines
CHECKPOINT_EVERY = 100  # steps between checkpoints of a resumable run


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings for one model (AdamW, linear warmup then cosine decay)."""

    steps: int
    seq_len: int = 256
    batch_size: int = 8
    lr: float = 3e-3
    warmup_steps: int = 50
    weight_decay: float = 0.1
    distill_weight: float = 0.0  # weight of KL(target || model) against the plain LM loss
    bf16_autocast: bool = True  # bf16 matmuls in training (weights stay fp32); ~1.4x on AVX512-BF16
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW's
    clip_norm: float | None = 1.0  # gradient norm clipping (None: off)


def short_warmup(steps: int) -> int:
    """Warmup for a drafter's short run: a tenth of the steps, at most 50."""
    return min(50, steps // 10)


def seeded(seed: int) -> torch.Generator:
    """Seed torch's global generator (weight init) and return a batch-order generator seeded alike.

    Call it where the weights are about to be initialised; the returned generator is independent
    of the global one, so what runs in between does not change the batch order.
    """
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def lr_factor(step: int, config: TrainConfig) -> float:
    """Linear warmup to 1, then cosine decay towards 0.1 at ``config.steps``."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))


def count_parameters(module: torch.nn.Module) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in module.parameters())


def train(module: torch.nn.Module, loss_of: Callable[[int], torch.Tensor], config: TrainConfig,
          name: str = "model", checkpoint: Path | None = None, generator: torch.Generator | None = None) -> float:
    """Train ``module``'s trainable parameters in place for ``config.steps`` steps; returns wall seconds
    (of every sitting, when resumed).

    ``loss_of(step)`` draws step ``step``'s batch and returns its loss (run under bf16 autocast when
    ``config.bf16_autocast``). Progress goes to stderr every ``LOG_EVERY`` steps and at the last.
    ``checkpoint``: a file to save progress to and resume from (``generator``: the batch generator
    ``loss_of`` draws from, saved with it); it is removed once the run is done.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, config))
    first, spent = 0, 0.0
    if checkpoint is not None and checkpoint.exists():
        first, spent = _resume(checkpoint, module, optimizer, schedule, generator, config)
        print(f"[{name}] resumed at step {first}/{config.steps} from {checkpoint}", file=sys.stderr, flush=True)
    module.train()
    start = time.perf_counter() - spent
    for step in range(first, config.steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16_autocast):
            loss = loss_of(step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, config.clip_norm)
        optimizer.step()
        schedule.step()
        if step % LOG_EVERY == 0 or step == config.steps - 1:
            log_progress(name, step + 1, config.steps, loss.item(), time.perf_counter() - start)
        if checkpoint is not None and (step + 1) % CHECKPOINT_EVERY == 0 and step + 1 < config.steps:
            _save(checkpoint, step + 1, time.perf_counter() - start, module, optimizer, schedule, generator, config)
    module.eval()
    if checkpoint is not None:
        checkpoint.unlink(missing_ok=True)
    return time.perf_counter() - start


def _save(path: Path, step: int, seconds: float, module, optimizer, schedule, generator, config: TrainConfig) -> None:
    state = {"step": step, "seconds": seconds, "config": asdict(config), "module": module.state_dict(),
             "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
             "generator": None if generator is None else generator.get_state()}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda tmp: torch.save(state, tmp))  # a run stopped mid-save keeps the previous checkpoint


def _resume(path: Path, module, optimizer, schedule, generator, config: TrainConfig) -> tuple[int, float]:
    state = torch.load(path, weights_only=True)
    if state["config"] != asdict(config):
        raise ValueError(f"{path} is a checkpoint of other training settings; remove it to start afresh")
    module.load_state_dict(state["module"])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    if generator is not None:
        generator.set_state(state["generator"])
    return state["step"], state["seconds"]


def log_progress(name: str, done: int, steps: int, loss: float, elapsed: float) -> None:
    eta = elapsed / done * (steps - done)
    print(f"[{name}] step {done}/{steps} loss {loss:.3f} elapsed {elapsed / 60:.1f} min ETA {eta / 60:.1f} min",
          file=sys.stderr, flush=True)
