#!/usr/bin/env bash
# End to end on the device: one `fact optimize` per problem, in one numerics mode (discover -> tune -> op
# library -> compose -> check vs eager and float64 -> time vs eager, torch.compile and torch.compile
# max-autotune -> report.json, report.md, chart.png). Everything comes back as $OUT/e2e_<numerics>.tgz;
# bench/scripts/e2e_report.py merges such archives into bench/results/e2e_h100.{json,md}.
# Usage (device): [MAX_AUTOTUNE=0] [TOP=4] bash bench/scripts/e2e_h100.sh NUMERICS [minigpt|llama3|FILE.py ...]
# Carry .devbin and .cutlass (bench/scripts/build_device_binary.sh), and .devcache/ if an earlier call's
# tuning.sqlite was saved there: winners tuned before are then reused, not tuned again.
set -uo pipefail
source bench/scripts/device_env.sh
n=${1:-tf32}
shift || true
[ $# -gt 0 ] || set -- minigpt llama3
top=${TOP:-4}
# /tmp outlives a call while the machine stays warm: the kernel cache (device_env.sh) and the tuning DB too.
export FACT_TUNING_DB=/tmp/fact-e2e-tuning.sqlite
if [ ! -f "$FACT_TUNING_DB" ] && [ -f .devcache/tuning.sqlite ]; then cp .devcache/tuning.sqlite "$FACT_TUNING_DB"; fi
flags=()
[ "${MAX_AUTOTUNE:-1}" = 0 ] && flags+=(--no-max-autotune)
# Each optimize gets an equal share of ~8.5 minutes, so the call returns its results inside its 10.
limit=${LIMIT_S:-$(( 510 / $# ))}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p "$OUT/work"
for p in "$@"; do
  case "$p" in
    minigpt) file=bench/problems/level3/minigpt_block.py ;;
    llama3) file=bench/problems/level3/llama3_block.py ;;
    *) file="$p" ;;
  esac
  name="$(basename "$file" .py)-$n"
  dir="/tmp/fact-e2e/$name"
  rm -rf "$dir"
  echo "=== $name (limit ${limit} s)"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$FACT_BIN" optimize "$file" --numerics "$n" --top "$top" --out "$dir" "${flags[@]}" \
    > "$OUT/work/$name.log" 2>&1
  echo "exit $? after $(( $(date +%s) - t0 )) s"
  mkdir -p "$OUT/work/$name"
  # The report, chart, check and logs; the composed folder without its library (the manifest names the kernels).
  (cd "$dir" 2>/dev/null && cp -r report.json report.md chart.png e2e.json plan.json tune.json tune.compose.json *.log \
     "$OUT/work/$name/" 2>/dev/null; mkdir -p "$OUT/work/$name/composed" && cp composed/*.py composed/*.json \
     "$OUT/work/$name/composed/" 2>/dev/null)
done
cp "$FACT_TUNING_DB" "$OUT/tuning.sqlite" 2>/dev/null
tar -C "$OUT" -czf "$OUT/e2e_$n.tgz" work && rm -rf "$OUT/work"
python3 - "$OUT/e2e_$n.tgz" <<'PY'
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t.getmembers():
        if m.name.endswith("/report.json"):
            r = json.load(t.extractfile(m)); e = r.get("e2e") or {}
            f = lambda k: "-" if e.get(k) is None else f"{e[k]:.2f}"
            acc = [p["rule"] + "@" + p["anchor"] for p in r.get("patterns", []) if p.get("accepted")]
            print(f"{m.name.split('/')[1]}: correct={e.get('correct')} eager={f('eager_ms')} compile={f('compile_default_ms')} "
                  f"max-autotune={f('compile_max_autotune_ms')} FACT={f('composed_ms')} ms; "
                  f"fallback={(e.get('fallback') or {}).get('reason')}; FACT ops: {', '.join(acc) or 'none'}")
            # The non-GEMM families (LayerNorm/RMSNorm, attention, RoPE): their op, or why PyTorch kept them.
            for p in r.get("patterns", []):
                if p.get("family") in ("normalization", "attention", "rope"):
                    print(f"  {p['family']:<13} {p['rule']}@{p['anchor']}: "
                          f"{('FACT op ' + str(p.get('op'))) if p.get('accepted') else 'PyTorch'}; {p.get('why')}")
PY
