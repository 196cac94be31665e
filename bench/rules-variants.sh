#!/usr/bin/env bash
# The collision-rule kernel variants side by side on one GPU (bench/results/rules-perf-notes.md
# says what each one changes and what it is predicted to gain): mpcbox-bench-rules once per
# variant, each with its tuning knobs, then one table rule × variant → ms/step (× SRD of the
# same run). Run from the repository root with the release binaries in .gpu/bin:
#   [ONLY="default f2mb4"] bash bench/rules-variants.sh [sizes (128,256)] [shear: both|no|yes (both)]
# Logs go to $OUT/rules-variants (or /tmp/rules-variants). About 20-30 s per variant on an
# H200 (NVRTC compile, 256³ × 10 and 128³ × 10, 60 steps per rule and shear); variants that
# would start after 420 s are skipped so that the whole stays well under 8 minutes.
set -uo pipefail

BIN=${BIN:-.gpu/bin/mpcbox-bench-rules}
SIZES=${1:-128,256}
SHEAR=${2:-both}
LOGS=${OUT:-/tmp}/rules-variants
mkdir -p "$LOGS"

# name | environment | MPCBOX_NVRTC_OPTIONS
# "first" is the first version's code path (run-time rule argument, leader atomics, polar
# normals, velocities always read, no register cap); only the padded per-cell stride of the
# extended sums is new there. Its MPC-AT draws differ from the CPU's (polar): speed only.
VARIANTS=(
  "first|MPCBOX_RULES_KERNELS=generic|-DMPC_RULE_FLUSH=0 -DMPC_AT_NORMALS=0 -DMPC_RULES_LAZY_VELOCITY=0 -DMPC_RULES_MIN_BLOCKS=1"
  "default||"
  "flush0||-DMPC_RULE_FLUSH=0"
  "flush2||-DMPC_RULE_FLUSH=2"
  "polar||-DMPC_AT_NORMALS=0"
  "generic|MPCBOX_RULES_KERNELS=generic|"
  "minblk1||-DMPC_RULES_MIN_BLOCKS=1"
  "minblk3||-DMPC_RULES_MIN_BLOCKS=3"
  "eager_v||-DMPC_RULES_LAZY_VELOCITY=0"
  "f2mb4||-DMPC_RULE_FLUSH=2 -DMPC_RULES_MIN_BLOCKS=4"
)
ONLY=${ONLY:-}   # e.g. ONLY="default f2mb4": run only these variants

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null
start=$(date +%s)
ran=()
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name envs opts <<<"$v"
  if [[ -n $ONLY && " $ONLY " != *" $name "* ]]; then
    continue
  fi
  if (($(date +%s) - start > 420)); then
    echo "skipped $name (time budget)"
    continue
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086 # $envs is a list of NAME=value words
  env $envs MPCBOX_NVRTC_OPTIONS="$opts" timeout 150 "$BIN" --sizes "$SIZES" --shear "$SHEAR" \
    >"$LOGS/$name.md" 2>&1
  rc=$?
  printf '%-8s rc=%s %3ss  %s %s\n' "$name" "$rc" "$(($(date +%s) - t0))" "$envs" "$opts"
  if ((rc != 0)); then
    tail -5 "$LOGS/$name.md"
  fi
  ran+=("$name")
done

# rows "| 256³ × 10 | MPC-AT | no | 25.065 | 2.568 | 6.69 |" of every log → one table
echo
printf '| cells | shear | rule |'
for n in "${ran[@]}"; do printf ' %s |' "$n"; done
echo
printf '|---|---|---|'
for _ in "${ran[@]}"; do printf -- '---|'; done
echo
for n in "${ran[@]}"; do
  awk -F'|' -v n="$n" '$2 ~ /³/ && $6 ~ /[0-9]/ {
      gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4)
      printf "%s|%s|%s|%s|%.2f (%.2f×)\n", $2, $4, $3, n, $5, $6 }' "$LOGS/$n.md"
done | awk -F'|' -v order="${ran[*]}" '
  BEGIN { nv = split(order, names, " ") }
  { key = $1 "|" $2 "|" $3; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key } val[key, $4] = $5 }
  END {
    for (i = 1; i <= nk; i++) {
      split(keys[i], k, "|"); printf "| %s | %s | %s |", k[1], k[2], k[3]
      for (j = 1; j <= nv; j++) { x = val[keys[i], names[j]]; printf " %s |", (x == "" ? "-" : x) }
      print ""
    }
  }'
echo
echo "logs: $LOGS"
