"""bench/scripts/optimize_time_report.py turns the device archive into a results table: checked on a made-up
archive with the shapes optimize_time_h100.sh writes (run.json per run, report.json's process block)."""
import json
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _archive(tmp: Path) -> Path:
    work = tmp / "work"
    for name, wall, starts in (("cold", 250.0, 2), ("warm", 21.5, 1)):
        d = work / name
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"run": name, "wall_s": wall, "exit": 0, "flags": []}))
        (d / "report.json").write_text(json.dumps({
            "model": "minigpt_block.py", "numerics": "tf32",
            "e2e": {"composed_ms": 4.0, "eager_ms": 13.2, "correct": True, "device": "H100", "torch": "2.11"},
            "patterns": [{"rule": "gemm", "anchor": "linear", "accepted": True}],
            "process": {"python_starts": starts, "python_starts_by_use": {"fact.worker": starts},
                        "compiles": {"gemm_a": 1 if name == "cold" else 0},
                        "step_seconds": {"total": wall, "e2e check": 4.5}}}))
    out = tmp / "out"
    out.mkdir()
    with tarfile.open(out / "optimize_time.tgz", "w:gz") as t:
        t.add(work, arcname="work")
    return out


def test_table_names_each_run_with_its_counts(tmp_path):
    out = _archive(tmp_path)
    dest = tmp_path / "result"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/optimize_time_report.py"), str(out), "--out", str(dest)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(dest.with_suffix(".json").read_text())
    assert [row["run"] for row in doc["rows"]] == ["cold", "warm"]
    warm = doc["rows"][1]
    assert warm["wall_s"] == 21.5 and warm["python_starts"] == 1 and warm["max_compiles_per_kernel"] == 0
    assert warm["wall_s_less_e2e"] == 17.0
    md = dest.with_suffix(".md").read_text()
    assert "| minigpt_block.py | warm | tuning DB, kernel and trace caches warm | 21.5 | 17.0 | 0 | 1 | 0 | 4.00 |" in md
    assert "fact.worker x1" in md

    # A later call that runs another problem keeps these rows (call "earlier", their commit) with --previous.
    earlier = json.loads(dest.with_suffix(".json").read_text())
    earlier["rows"][0]["commit"] = "abc1234"
    dest.with_suffix(".json").write_text(json.dumps(earlier))
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "work").rename(tmp_path / "old_work")
    work = tmp_path / "work" / "warm"
    work.mkdir(parents=True)
    (work / "run.json").write_text(json.dumps({"run": "warm", "wall_s": 3.0, "exit": 0, "flags": []}))
    (work / "report.json").write_text(json.dumps({"model": "17_Matmul.py", "numerics": "tf32", "e2e": {}}))
    with tarfile.open(other / "optimize_time.tgz", "w:gz") as t:
        t.add(tmp_path / "work", arcname="work")
    merged = tmp_path / "merged"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/optimize_time_report.py"), str(other), "--out",
                        str(merged), "--previous", str(dest.with_suffix(".json"))], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.loads(merged.with_suffix(".json").read_text())["rows"]
    assert [(row["model"], row["call"]) for row in rows] == [
        ("minigpt_block.py", "earlier"), ("minigpt_block.py", "earlier"), ("17_Matmul.py", 1)]
    assert rows[0]["commit"] == "abc1234" and rows[1]["wall_s_less_e2e"] == 17.0


def test_an_archive_of_several_problems_gives_each_its_rows(tmp_path):
    # optimize_time_h100.sh with several problems: work/<problem>/<run>/, each run.json naming its --top.
    work = tmp_path / "work"
    for problem in ("6_Matmul_with_large_K_dimension_", "1_Square_matrix_multiplication_"):
        for name, wall in (("cold", 58.0), ("warm", 12.0), ("warm-fact", 9.0)):
            d = work / problem / name
            d.mkdir(parents=True)
            (d / "run.json").write_text(json.dumps({"run": name, "wall_s": wall, "exit": 0, "top": 2, "flags": []}))
            (d / "report.json").write_text(json.dumps({"model": problem + ".py", "numerics": "tf32",
                                                       "e2e": {"device": "H100", "torch": "2.11"}}))
    out = tmp_path / "out"
    out.mkdir()
    with tarfile.open(out / "optimize_time.tgz", "w:gz") as t:
        t.add(work, arcname="work")
    dest = tmp_path / "result"
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/optimize_time_report.py"), str(out), "--out", str(dest)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(dest.with_suffix(".json").read_text())
    assert [(row["model"], row["run"]) for row in doc["rows"]][:3] == [
        ("1_Square_matrix_multiplication_.py", "cold"), ("1_Square_matrix_multiplication_.py", "warm"),
        ("1_Square_matrix_multiplication_.py", "warm-fact")]
    assert len(doc["rows"]) == 6 and len(doc["model"]) == 2
    assert "`--top 2 --no-max-autotune`" in dest.with_suffix(".md").read_text()


def test_missing_archive_is_a_clear_error(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "bench/scripts/optimize_time_report.py"), str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode != 0 and "optimize_time.tgz: no such file" in r.stderr
