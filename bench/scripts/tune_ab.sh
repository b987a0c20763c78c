#!/usr/bin/env bash
# A kernel template against another version of itself, on the device: every problem's patterns of one family tuned
# with the working tree's template, then with OLD in its place, each from an empty kernel cache and tuning database,
# so both measure the same ranked configs (a template's code is not in the ranking). For changes inside a kernel
# (an epilogue's stores) where a suite's per-problem times would mix in everything else. TEMPLATE may also be a data
# file the tune reads: data/families/conv.json against a copy with one config axis narrowed (e.g. "fold_width":
# [false]) measures what each ranking picks.
# Usage (device): bash bench/scripts/tune_ab.sh FAMILY TEMPLATE OLD TOP problem.py...
#   TEMPLATE: the tree's file (e.g. templates/cutlass/conv_output_store.hpp.in); OLD: the other version, carried in an
#   ignored folder (e.g. `mkdir -p .ab && git show HEAD~1:TEMPLATE > .ab/old.in`, carry .ab).
# Returns in $OUT: <new|old>/<problem>.json (fact tune --report, with each pattern's timed layouts under "variants"),
# <new|old>/<problem>.log, and ab.md / ab.json (per pattern and timed layout: best kernel and baseline, both versions;
# each version's measured candidates).
set -uo pipefail
source bench/scripts/device_env.sh
family=$1 template=$2 old=$3 top=$4
shift 4
[ -f "$template" ] && [ -f "$old" ] || { echo "usage: tune_ab.sh FAMILY TEMPLATE OLD TOP problem.py..."; exit 2; }
cp "$template" "$OUT/template.new"
restore() { cp "$OUT/template.new" "$template"; }
trap restore EXIT
nvidia-smi -L
for version in new old; do
  [ "$version" = old ] && cp "$old" "$template"
  dir="$OUT/$version"
  mkdir -p "$dir"
  export FACT_KERNEL_CACHE="/tmp/fact-kernels-ab-$version" FACT_TUNING_DB="$dir/tuning.sqlite"
  start=$(date +%s)
  # One tune per problem at once: their nvcc builds overlap, their GPU work takes turns under FACT's GPU lock.
  for p in "$@"; do
    name=$(basename "$p" .py)
    ( "$FACT_BIN" discover "$p" --json "$dir/$name.plan.json" > "$dir/$name.log" 2>&1 &&
      "$FACT_BIN" tune "$dir/$name.plan.json" --family "$family" --top "$top" --report "$dir/$name.json" \
        --work-dir "$dir/work-$name" >> "$dir/$name.log" 2>&1 ) &
  done
  wait
  echo "$version: $(( $(date +%s) - start )) s"
done
# What comes back from $OUT is limited in count: the plans, measurement folders and databases stay here (each
# version's measured candidates go into ab.json first).
rm -rf "$OUT"/new/work-* "$OUT"/old/work-* "$OUT"/*/*.plan.json
python3 - "$OUT" "$@" <<'PY' | tee "$OUT/ab.md"
import json, os, sys
out, problems = sys.argv[1], [os.path.basename(p)[:-3] for p in sys.argv[2:]]
ms = lambda v: "-" if v is None else f"{v:.4f}"
table = []
print("| problem | pattern | layout | new FACT ms | old FACT ms | baseline ms (new run / old run) |")
print("|---|---|---|---|---|---|")
for name in problems:
    reports = {}
    for version in ("new", "old"):
        try:
            reports[version] = json.load(open(f"{out}/{version}/{name}.json"))
        except (OSError, ValueError) as e:
            reports[version] = {"error": str(e)}
    rows = lambda r: {f"{p.get('pattern')} at {p.get('anchor')}": p for p in r.get("rows", [])}
    new, old = rows(reports["new"]), rows(reports["old"])
    for pid in sorted(new.keys() | old.keys()):
        n, o = new.get(pid, {}), old.get(pid, {})
        layouts = [("as tuned", n, o)] + [
            (f"channels_last={v['problem'].get('channels_last', 0)}", v,
             (o.get("variants") or [])[i] if i < len(o.get("variants") or []) else {})
            for i, v in enumerate(n.get("variants", []))]
        for layout, a, b in layouts:
            table.append({"problem": name, "pattern": pid, "layout": layout, "new_fact_ms": a.get("fact_ms"),
                          "old_fact_ms": b.get("fact_ms"), "baseline": a.get("baseline") or a.get("baseline_name"),
                          "new_baseline_ms": a.get("baseline_ms"), "old_baseline_ms": b.get("baseline_ms")})
            print(f"| {name} | {pid} | {layout} | {ms(a.get('fact_ms'))} | {ms(b.get('fact_ms'))} | "
                  f"{ms(a.get('baseline_ms'))} / {ms(b.get('baseline_ms'))} |")
# Every measured candidate of each version: config (tile, CTAs a SM, warpgroups, cluster, splits, ...), time, status.
import sqlite3
candidates = {}
for version in ("new", "old"):
    try:
        db = sqlite3.connect(f"{out}/{version}/tuning.sqlite")
        candidates[version] = [
            {"workload": w, "config_id": c, "status": st, "time_ms": t,
             "config": {k: v for k, v in json.loads(cfg).items() if k not in ("epilogue", "arch", "element", "family")}}
            for w, c, st, t, cfg in db.execute("SELECT workload_id, config_id, status, time_ms, config FROM candidates "
                                               "ORDER BY workload_id, time_ms")]
    except sqlite3.Error as e:
        candidates[version] = {"error": str(e)}
json.dump({"rows": table, "candidates": candidates}, open(f"{out}/ab.json", "w"), indent=1)
PY
rm -f "$OUT"/*/tuning.sqlite
