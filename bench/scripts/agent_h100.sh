#!/usr/bin/env bash
# The LLM agent on the device, with a scripted local LLM (no network): run 1 of `fact optimize --agent llm`
# generates, compiles, verifies and registers a kernel for the swish-absmax row chain no rule covers
# (replies in bench/scripts/agent_replies/: a compile error, a correct kernel, a wrong one, then CuTe
# versions through tiling, pipelining and epilogue); run 2 finds it in the registry, re-verifies the stored
# kernel and sends no request; in both runs stage 2/3 then tune the registered kernel as the rowwise family
# (verified vs the fragment in float64, timed vs PyTorch's ops) and compose it into ModelNew as
# torch.ops.fact.rowwise_swish_absmax_rows. Results: $OUT/summary.md, transcript, agent reports, registry
# entry, tune rows and ModelNew's FACT calls per run, tar.
# Usage (device, after bench/scripts/build_device_binary.sh here; carry .devbin and .cutlass):
#   bash bench/scripts/agent_h100.sh
set -uo pipefail
source bench/scripts/device_env.sh
export FACT_REGISTRY="$OUT/registry" FACT_AGENT_NCU=1
problem=bench/problems/level2/swish_absmax_rows.py
w="$OUT/agent"
mkdir -p "$w"
python3 tests/python/scripted_llm_server.py bench/scripts/agent_replies/script.json --port-file "$w/port" \
  --log "$w/server_requests.jsonl" &
srv=$!
trap 'kill $srv 2>/dev/null' EXIT
for _ in $(seq 50); do [ -f "$w/port" ] && break; sleep 0.2; done
url="http://127.0.0.1:$(cat "$w/port")/v1"
"$FACT_BIN" registry list > "$w/registry_before.txt" 2>&1
for run in run1 run2; do
  start=$(date +%s)
  "$FACT_BIN" optimize "$problem" --agent llm --endpoint "$url" --model scripted-fact-demo --max-rounds 6 --top 1 \
    --out "$w/$run" > "$w/$run.log" 2>&1
  echo "$run: exit $? in $(( $(date +%s) - start )) s" >> "$w/runs.txt"
  wc -l < "$w/server_requests.jsonl" | sed "s/^/LLM requests so far after $run: /" >> "$w/runs.txt" 2>/dev/null
done
"$FACT_BIN" registry list > "$w/registry_after.txt" 2>&1
"$FACT_BIN" registry export "$w/registry_export" > /dev/null 2>&1
{
  echo "# FACT agent on the device (scripted LLM)"; echo
  cat "$w/runs.txt"; echo
  echo "## Registry before"; echo '```'; cat "$w/registry_before.txt"; echo '```'
  echo "## Registry after"; echo '```'; cat "$w/registry_after.txt"; echo '```'
  for run in run1 run2; do echo "## $run agent report"; cat "$w/$run/agent/agent.md" 2>/dev/null || echo "(none: see $run.log)"; echo; done
  for run in run1 run2; do
    echo "## $run: the rowwise pattern in stage 2/3"; echo '```'
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    if r.get("family") == "rowwise":
        print(r["pattern"], r["status"], "winner", r.get("winner"), "fact_ms", r.get("fact_ms"), "torch_ms",
              r.get("baseline_ms"), "rel_err", r.get("rel_err"), r.get("message", ""))' "$w/$run/tune.json" 2>&1
    grep -n "torch.ops.fact.rowwise_" "$w/$run/composed/model_new.py" 2>&1 || echo "(no rowwise call in ModelNew)"
    python3 -c 'import json,sys; print("e2e:", json.dumps(json.load(open(sys.argv[1])).get("e2e")))' \
      "$w/$run/report.json" 2>&1 | cut -c1-600
    echo '```'
  done
} > "$OUT/summary.md"
cp "$w/run1/agent/transcript.jsonl" "$OUT/transcript_run1.jsonl" 2>/dev/null
cp "$w/run1/agent/agent.json" "$OUT/agent_run1.json" 2>/dev/null
cp "$w/run2/agent/agent.json" "$OUT/agent_run2.json" 2>/dev/null
tar -C "$w" -czf "$OUT/registry_entry.tgz" registry_export 2>/dev/null
tar -C "$OUT" --exclude='*.so' --exclude='*.o' -czf "$OUT/agent_h100.tgz" agent && rm -rf "$w" "$OUT/registry"
cat "$OUT/summary.md"
