#!/usr/bin/env bash
# Production runs at engine speed: start-up, stepping with and without checkpoints, the
# blocking part of a checkpoint, its background write rate and a resume's read rate, beside the
# disk's own sequential rates (dd, direct I/O). Self-contained: needs only an mpcbox binary,
# python3 and a multi-GPU host.
#
#   bench/scripts/production.sh [MPCBOX_BINARY] [SCRATCH_DIR]
#
# MPCBOX_BINARY defaults to target/release/mpcbox (cargo build --release), SCRATCH_DIR to
# $OUT or /tmp/mpcbox-production (on the disk to measure: checkpoints go there). RUST_LOG
# (default info; mpcbox=debug: each block's stages) reaches the runs. CK_STEPS (default 10000)
# is the length of the run with a checkpoint every 1000 steps. Set
# ONLY=checkpoints to run just the checkpointed run, the resumes and the checkpoint bench;
# BIG=1 to add 512³ × 10 (1.34 × 10⁹ particles) and 768³ × 10 (4.5 × 10⁹; four GPUs of 80 GB or
# larger), each with one checkpoint; ONLY=big runs just those (BIG_EDGES="768": that one).
# Every figure is read from the runs' summary.json (`timing`) and printed as a table.
set -u
BIN=${1:-target/release/mpcbox}
D=${2:-${OUT:-/tmp/mpcbox-production}}
mkdir -p "$D"
LOG=$D/production.md
log() { echo "$@" | tee -a "$LOG"; }
: > "$LOG"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee -a "$LOG"
NGPU=$(nvidia-smi -L | wc -l)

# the disk's own sequential rates: 8 GiB written and read back with direct I/O
dd if=/dev/zero of="$D/dd.bin" bs=64M count=128 oflag=direct conv=fsync 2> "$D/dd_write.txt"
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
dd if="$D/dd.bin" of=/dev/null bs=64M iflag=direct 2> "$D/dd_read.txt"
rm -f "$D/dd.bin"
log "disk write (dd oflag=direct): $(tail -1 "$D/dd_write.txt")"
log "disk read  (dd iflag=direct): $(tail -1 "$D/dd_read.txt")"

# examples/multi_gpu.ron with a checkpoint every $2 steps (0: only the last) into $1
config() {
  sed -e "s/checkpoint_interval: [0-9]*/checkpoint_interval: $2/" \
      -e "s|directory: \"[^\"]*\"|directory: \"$1\"|" \
      -e "s/cells: ([0-9]*, [0-9]*, [0-9]*)/cells: ($3, $3, $3)/" \
      examples/multi_gpu.ron > "$1.ron"
  echo "$1.ron"
}
# run NAME EDGE CHECKPOINT_EVERY STEPS DEVICE [ENV...]
run() {
  local name=$1 edge=$2 every=$3 steps=$4 device=$5; shift 5
  local out=$D/$name
  rm -rf "$out"
  env "$@" RUST_LOG=${RUST_LOG:-info} "$BIN" run "$(config "$out" "$every" "$edge")" --device "$device" \
    --steps "$steps" --overwrite --quiet > "$D/$name.json" 2> "$D/$name.log"
  log "$name: rc=$? ($(grep -c 'checkpoint of step' "$D/$name.log") checkpoints)"
}
resume() {
  local name=$1 from=$2 steps=$3 device=$4
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
  RUST_LOG=${RUST_LOG:-info} "$BIN" run --resume "$D/$from/checkpoint.mpcbox" --device "$device" \
    --steps "$steps" -o "$D/$name" --quiet > "$D/$name.json" 2> "$D/$name.log"
  log "$name: rc=$?"
}

CK_STEPS=${CK_STEPS:-10000}
export XDG_CACHE_HOME=$D/cache
rm -rf "$XDG_CACHE_HOME"
if [ "${ONLY:-}" != big ]; then
if [ "${ONLY:-}" != checkpoints ]; then
# a cold start (kernels compiled), then warm ones (kernels read back)
run cold-1gpu 256 0 10 cuda:0
# the kernels with the walls' code are another set, compiled cold here too
RUST_LOG=${RUST_LOG:-info} "$BIN" run examples/poiseuille_slit.ron --device cuda:0 --steps 10 \
  -o "$D/cold-walls" --overwrite --quiet > "$D/cold-walls.json" 2> "$D/cold-walls.log"
log "cold-walls: rc=$?"
run warm-1gpu 256 0 10 cuda:0
run warm-all 256 0 10 all
# stepping with checkpoints every 1000 steps (CK_STEPS long: a production run's steady state
# and its last write), without, and written by the stepping thread
run ck-none 256 0 3000 all
fi
run ck-1000 256 1000 "$CK_STEPS" all
[ "${ONLY:-}" != checkpoints ] && run ck-1000-blocking 256 1000 3000 all MPCBOX_CHECKPOINTS=blocking
resume resume-all ck-1000 $((CK_STEPS + 10)) all
resume resume-1gpu ck-1000 $((CK_STEPS + 10)) cuda:0
# the checkpoint's write and a resume's read alone, beside the disk's direct-I/O rates
# (records in $D/records), where mpcbox-bench lies beside the binary
BENCH=$(dirname "$BIN")/mpcbox-bench
if [ -x "$BENCH" ]; then
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
  "$BENCH" --records "$D/records" checkpoint --sizes 256 --device all --parts "$NGPU" \
    --dir "$D" 2>&1 | tail -3 | tee -a "$LOG"
fi
fi
# the largest boxes, each with one checkpoint (its last) and removed after: a 768³ × 10
# checkpoint is 199 GB, and a second one (or a resume's) would not fit beside it on most disks
if [ "${BIG:-0}" = 1 ] || [ "${ONLY:-}" = big ]; then
  for edge in ${BIG_EDGES:-512 768}; do
    need=$((edge * edge * edge * 10 * 44 / 1000000000 + 8))
    free=$(df -BG --output=avail "$D" | tail -1 | tr -dc 0-9)
    if [ "$free" -lt "$need" ]; then
      log "big-$edge: skipped, $free GB free on $D and a checkpoint needs $need GB"
      continue
    fi
    run big-$edge $edge 0 20 all
    rm -rf "$D/big-$edge"
  done
fi

python3 - "$D" "$LOG" <<'EOF'
import json, os, sys
d, logf = sys.argv[1], sys.argv[2]
rows = []
for name in sorted(os.listdir(d)):
    if not name.endswith(".json"):
        continue
    try:
        s = json.load(open(os.path.join(d, name)))
    except Exception:
        continue
    t = s.get("timing", {})
    c = t.get("checkpoints", {})
    phases = {p["name"]: p["seconds"] for p in t.get("startup_phases", [])}
    # a resume's read: the count of each slab's particles (the y values) and the read proper
    read = [sum(v for k, v in phases.items()
                if k in ("read the checkpoint", "count the checkpoint's particles"))]
    read = read if read[0] > 0 else []
    n = s["fluid_particles"]
    steps = s["steps_this_run"]
    step_rate = n * steps / max(t.get("stepping_seconds", 0), 1e-9)
    bg = c.get("background_seconds", 0)
    rows.append((name[:-5], n, t.get("startup_seconds"), step_rate, s["particle_steps_per_second"],
                 c.get("written", 0), c.get("blocking_seconds", 0),
                 c.get("longest_blocking_seconds", 0),
                 c.get("bytes", 0) / bg / 1e9 if bg else None,
                 n * 44 / read[0] / 1e9 if read else None,
                 (t.get("peak_host_memory_bytes") or 0) / 2**30))
out = ["", "| run | particles | start-up s | stepping G p-s/s | run loop G p-s/s | checkpoints | "
       "held s, all | longest held s | background GB/s | resume read GB/s | peak host GiB |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
f = lambda x, fmt: "–" if x is None else fmt.format(x)
for r in rows:
    out.append(f"| {r[0]} | {r[1]:.3e} | {f(r[2], '{:.2f}')} | {r[3]/1e9:.2f} | {r[4]/1e9:.2f} | "
               f"{r[5]} | {r[6]:.2f} | {r[7]:.3f} | {f(r[8], '{:.2f}')} | {f(r[9], '{:.2f}')} | "
               f"{r[10]:.1f} |")
print("\n".join(out))
open(logf, "a").write("\n".join(out) + "\n")
EOF
for f in "$D"/*.log; do
  log "$(basename "$f"): $(grep -E 'start-up took|time: ' "$f" | sed 's/.*INFO [a-z:_]*: //' | tr '\n' ' ')"
done
