"""fact.compose.kernel_profile: the profiler's key averages summed into a variant's kernels (CPU: fake events)."""
from types import SimpleNamespace

from fact.compose import e2e_check
from fact.compose.kernel_profile import NAME_CHARS, TOP_KERNELS, kernel_table, summary_lines


def event(key, us, count=10, device_type="DeviceType.CUDA"):
    return SimpleNamespace(key=key, self_device_time_total=us, count=count, device_type=device_type)


def test_cuda_kernels_per_call_by_time_and_host_events_left_out():
    events = [event("cudaLaunchKernel", 500.0, device_type="DeviceType.CPU"),
              event("conv_fprop", 300.0), event("mish_kernel", 900.0, count=20), event("idle", 0.0)]
    t = kernel_table(events, calls=10)
    assert [k["kernel"] for k in t["kernels"]] == ["mish_kernel", "conv_fprop"]
    assert abs(t["kernels"][0]["ms_per_call"] - 0.09) < 1e-12 and t["kernels"][0]["launches_per_call"] == 2
    assert abs(t["gpu_ms_per_call"] - 0.12) < 1e-12 and t["calls"] == 10 and t["kernels_left_out"] == 0


def test_long_names_are_cut_and_only_the_heaviest_kernels_listed_but_all_counted():
    events = [event("k" * 5000, 1.0)] + [event(f"k{i}", float(i + 2)) for i in range(TOP_KERNELS + 5)]
    t = kernel_table(events, calls=1)
    assert len(t["kernels"]) == TOP_KERNELS and t["kernels_left_out"] == 6
    assert all(len(k["kernel"]) <= NAME_CHARS for k in t["kernels"])
    assert abs(t["gpu_ms_per_call"] - sum(e.self_device_time_total for e in events) / 1e3) < 1e-9


def test_summary_names_each_variant_and_a_failed_profile():
    lines = summary_lines({"eager": kernel_table([event("a", 100.0)], 1), "composed": {"error": "RuntimeError: x"}})
    assert lines[0].startswith("eager: 0.1000 ms") and "a" in lines[1]
    assert lines[2] == "composed: profile failed: RuntimeError: x"


def test_e2e_check_takes_a_profile_file(tmp_path):
    args = e2e_check.argument_parser().parse_args(["folder", "--profile", str(tmp_path / "p.json")])
    assert args.profile == tmp_path / "p.json"
