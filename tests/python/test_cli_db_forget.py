"""`fact db forget --matching TEXT`: the workloads whose `fact db list` text holds every TEXT go, the others stay
(how a model's layers of one kind are tuned again: its depthwise convs after a new kernel)."""
import json
import subprocess

from composed_module import FACT_BIN, needs_fact_binary


def workload(wid: int, groups: int, stride: int) -> dict:
    shape = {"n": 32, "c": 96, "k": 96, "groups": groups, "stride": [1, stride, stride], "filter": [1, 3, 3]}
    return {"id": wid, "key": {"pattern": "conv", "shape": shape, "dtype": "float32", "layout": "ndhwc",
                               "numerics": "fp32", "arch": "sm90", "cutlass_version": "4.2.0", "nvcc_version": "13.0"},
            "baseline": {"name": "torch conv", "time_ms": 0.2}, "candidates": [], "winner": "baseline",
            "device_name": "NVIDIA H200", "created_at": "2026-11-29T00:00:00Z", "updated_at": "2026-11-29T00:00:00Z"}


def fact(*args):
    return subprocess.run([str(FACT_BIN), *map(str, args)], capture_output=True, text=True)


@needs_fact_binary
def test_forget_matching_removes_only_the_workloads_holding_every_text(tmp_path):
    export, db = tmp_path / "export.json", tmp_path / "t.sqlite"
    export.write_text(json.dumps({"format": "fact-tuning-db-export", "version": 1, "source": "test",
                                  "workloads": [workload(1, 96, 1), workload(2, 96, 2), workload(3, 1, 2)]}))
    assert fact("db", "import", export, "--db", db).returncode == 0
    r = fact("db", "forget", "--matching", "groups=96", "--matching", "stride=[1,2,2]", "--db", db)
    assert r.returncode == 0 and "1 workload(s) removed" in r.stdout, r.stdout + r.stderr
    listed = fact("db", "list", "--db", db).stdout
    assert "2 workload(s)" in listed and "groups=1 " in listed and "stride=[1,1,1]" in listed, listed
    r = fact("db", "forget", "--db", db)
    assert r.returncode != 0 and "name workload ids, or --matching TEXT" in r.stderr
