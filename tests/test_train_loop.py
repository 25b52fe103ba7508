"""The shared training loop: a run stopped part-way resumes from its checkpoint to the very weights
an unbroken run ends with, and counts the time of every sitting."""
import pytest
import torch

from core.train import loop
from core.train.loop import TrainConfig, seeded, train

CONFIG = TrainConfig(steps=10, lr=1e-2, warmup_steps=2, bf16_autocast=False)


class Stop(Exception):
    pass


def run(checkpoint=None, stop_at=None, config=CONFIG, seconds=None):
    """Train a small regression from seed 0; raise ``Stop`` before step ``stop_at``. ``seconds``: a
    list the training's returned seconds are put in."""
    generator = seeded(0)
    model = torch.nn.Linear(4, 1)
    truth = torch.tensor([[1.0, -2.0, 3.0, 0.5]])

    def loss_of(step):
        if step == stop_at:
            raise Stop
        x = torch.randn(16, 4, generator=generator)
        return torch.nn.functional.mse_loss(model(x), x @ truth.T)

    spent = train(model, loss_of, config, "test", checkpoint, generator)
    if seconds is not None:
        seconds.append(spent)
    return model


def test_a_stopped_run_resumes_to_the_weights_of_an_unbroken_one(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "CHECKPOINT_EVERY", 3)
    whole = run()
    checkpoint = tmp_path / "run.ckpt"
    with pytest.raises(Stop):
        run(checkpoint, stop_at=7)
    assert checkpoint.exists()  # saved after step 6
    state = torch.load(checkpoint, weights_only=True)
    state["seconds"] = 1000.0  # as if the first sitting had taken that long
    torch.save(state, checkpoint)
    seconds = []
    resumed = run(checkpoint, seconds=seconds)
    assert not checkpoint.exists()  # a finished run leaves no checkpoint behind
    assert 1000.0 <= seconds[0] < 1100.0  # the first sitting's time counted with this one's
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_a_checkpoint_of_other_settings_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "CHECKPOINT_EVERY", 3)
    checkpoint = tmp_path / "run.ckpt"
    with pytest.raises(Stop):
        run(checkpoint, stop_at=4)
    longer = TrainConfig(steps=12, lr=1e-2, warmup_steps=2, bf16_autocast=False)
    with pytest.raises(ValueError, match="other training settings"):
        run(checkpoint, config=longer)
