"""KernelBench, the public suite FACT is judged on, read where it lies (../shared/kernelbench or $KERNELBENCH_DIR;
never copied into the repo): one problem of each level is discovered without error, and KernelBench's own MiniGPT
block (whose MLP is a lambda over submodules) gets FACT's patterns. The whole suite is
bench/scripts/kernelbench_discover.sh (bench/results/kernelbench_discover.json)."""
import json
import os
from pathlib import Path

import pytest
from composed_module import REPO_ROOT, fact, needs_fact_binary

KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR") or REPO_ROOT.parent / "shared" / "kernelbench")

pytestmark = [needs_fact_binary,
              pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(),
                                 reason=f"KernelBench not found at {KERNELBENCH} (set KERNELBENCH_DIR to the folder "
                                        "holding level1/, level2/, level3/)")]


@pytest.mark.parametrize("problem, rules", [
    ("level1/1_Square_matrix_multiplication_.py", {"gemm"}),
    ("level2/86_Matmul_Divide_GELU.py", {"gemm"}),
    ("level3/44_MiniGPTBlock.py", {"layer_norm", "sdpa_attention_manual"}),
])
def test_discovered_without_error(problem, rules, tmp_path):
    r = fact("discover", KERNELBENCH / problem, "--json", tmp_path / "plan.json")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert rules <= {p["rule"] for p in plan["patterns"]}, plan["patterns"]
    assert not plan["left_to_pytorch"].startswith("the whole module"), plan["left_to_pytorch"]
