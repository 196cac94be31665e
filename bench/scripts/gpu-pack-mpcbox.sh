#!/usr/bin/env bash
# ../shared/tools/gpu-pack for the mpcbox crate's test binaries and the bench binaries only (half
# the build time), without the binaries that have no GPU test (the carry limit is 64 MiB).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# tests that drive external tools (MPI, Python readers, NVRTC) are then ordinary tests, which the
# device's `--ignored` runs leave out (CI runs them); built without it they would be ignored ones
export MPCBOX_REQUIRE_EXTERNAL=1
rm -rf .gpu && mkdir -p .gpu/tests .gpu/bin
cargo test --release -p mpcbox --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m.get("profile", {}).get("test"):
        print(m["executable"])' | while read -r exe; do cp "$exe" .gpu/tests/; done
cargo build --release -p mpcbox-bench -p mpcbox --bins --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and not m.get("profile", {}).get("test"):
        print(m["executable"])' | while read -r exe; do cp "$exe" .gpu/bin/; done
# the MPI builds (own target directory: the feature rebuilds the library): mpcbox and the
# per-rank solutes example for tests/suite/mpi_*.rs (MPCBOX_MPI_BIN), the rank benchmark
if command -v mpicc >/dev/null 2>&1; then
  mkdir -p .gpu/mpi/examples
  cargo build --release --quiet --features mpi --bin mpcbox --example ranks_solutes --target-dir target/mpi
  cargo build --release --quiet -p mpcbox-bench --features mpi --bin mpcbox-bench-ranks \
    --bin mpcbox-bench-polymer --target-dir target/mpi
  cp target/mpi/release/mpcbox target/mpi/release/mpcbox-bench-ranks \
    target/mpi/release/mpcbox-bench-polymer .gpu/mpi/
  cp target/mpi/release/examples/ranks_solutes .gpu/mpi/examples/
  strip .gpu/mpi/mpcbox .gpu/mpi/mpcbox-bench-ranks .gpu/mpi/mpcbox-bench-polymer \
    .gpu/mpi/examples/ranks_solutes
fi
strip .gpu/tests/* .gpu/bin/* 2>/dev/null || true
for t in .gpu/tests/*; do
  [ "$("$t" --list --ignored 2>/dev/null | grep -c ': test')" = 0 ] && rm "$t"
done
rm -f .gpu/bin/mpcbox-bench .gpu/bin/mpcbox-bench-md .gpu/bin/mpcbox-bench-md-gpu
cp bench/scripts/*.sh .gpu/
du -sh .gpu; ls .gpu/tests | wc -l; ls .gpu/bin
