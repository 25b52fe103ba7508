"""``vllm:num_requests_running`` counts runs that are decoding: a run stepped by hand counts as
running only while a step is computed, and as paused (``sdlab_requests_paused``) in between."""
from __future__ import annotations

from core.serving.prometheus import ENGINE, LabMetrics


def gauges(lab: LabMetrics) -> tuple[float, float]:
    labels = ("tiny", ENGINE)
    return lab.running.labels(*labels)._value.get(), lab.paused.labels(*labels)._value.get()


def test_a_stepped_run_is_running_only_while_it_steps():
    lab = LabMetrics()
    meter = lab.meter("tiny", stepped=True)
    assert gauges(lab) == (0, 1)  # waiting for its first Step: not decoding
    with meter.stepping():
        assert gauges(lab) == (1, 0)
    assert gauges(lab) == (0, 1)
    with meter.stepping():
        meter.close()  # the run ends inside its last step
    assert gauges(lab) == (0, 0)
    meter.close()  # idempotent
    assert gauges(lab) == (0, 0)


def test_a_run_in_a_block_is_running_throughout():
    lab = LabMetrics()
    with lab.request("tiny"):
        assert gauges(lab) == (1, 0)
    assert gauges(lab) == (0, 0)
