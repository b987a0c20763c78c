"""The end-to-end timer (e2e_check.interleaved_ms) with a fake batch timer: identical modules measure alike
under steady clock drift, batches are sized from the warm-up, and the order rotates every round."""
from fact.compose.e2e_check import interleaved_ms


class DriftingClock:
    """Each timed batch reads 1% slower than the one before (a GPU warming up and clocking down)."""

    def __init__(self, base_ms):
        self.base_ms, self.batches, self.log = base_ms, 0, []

    def __call__(self, fn, inputs, calls):
        name = fn()
        self.log.append((name, calls))
        self.batches += 1
        return self.base_ms[name] * (1 + 0.01 * self.batches)


def variant(name):
    return lambda *inputs: name


def test_identical_variants_measure_alike_under_drift():
    clock = DriftingClock({"eager": 1.0, "composed": 1.0})
    ms = interleaved_ms({"eager": variant("eager"), "composed": variant("composed")}, (), 20, batch_ms=clock)
    assert abs(ms["eager"] - ms["composed"]) / ms["eager"] < 0.02
    # Timed one after the other, the same drift would have put the second 20 batches (about 20%) behind.
    assert clock.batches == 2 + 2 * 20


def test_a_real_difference_is_kept():
    clock = DriftingClock({"eager": 1.0, "composed": 0.8})
    ms = interleaved_ms({"eager": variant("eager"), "composed": variant("composed")}, (), 20, batch_ms=clock)
    assert 0.75 < ms["composed"] / ms["eager"] < 0.85


def test_batches_fill_the_target_and_order_rotates():
    clock = DriftingClock({"small": 0.1, "large": 10.0, "mid": 1.0})
    fns = {n: variant(n) for n in ("small", "large", "mid")}
    interleaved_ms(fns, (), 6, batch_ms=clock, target_batch_ms=2.0)
    timed = clock.log[3:]  # after one single-call estimate per variant
    calls = dict(timed)
    assert calls["large"] == 1 and calls["mid"] == 1 and 10 <= calls["small"] <= 20
    firsts = [timed[3 * r][0] for r in range(6)]
    assert firsts == ["small", "large", "mid", "small", "large", "mid"]


def test_the_graphed_replay_is_chosen_only_when_it_matched_and_was_clearly_faster(tmp_path):
    from fact.compose.e2e_check import choose_replay, write_replay_choice
    won = choose_replay(1.95, 1.41, None)
    assert won["chosen"] == "cuda_graph" and won["why"] == "one CUDA graph a call (1.41 ms vs 1.95 ms op by op)"
    assert choose_replay(5.21, 5.15, None)["chosen"] == "op_by_op"  # within the margin: ResNet-50's 1%
    mismatch = choose_replay(1.95, 1.41, "its result differs from the op-by-op replay's (max abs diff 0.5)")
    assert mismatch["chosen"] == "op_by_op" and "differs" in mismatch["why"]
    assert choose_replay(None, None, None)["chosen"] == "op_by_op"
    # replay.json beside model_new.py holds the choice; a later op-by-op choice removes it.
    write_replay_choice(tmp_path, won)
    assert (tmp_path / "replay.json").is_file()
    write_replay_choice(tmp_path, mismatch)
    assert not (tmp_path / "replay.json").exists()
