#!/usr/bin/env bash
# A benchmark run on a GPU machine in one command line, and its records brought home.
#
#   here:         bash bench/device.sh pack
#                 release builds into .gpu/ (carry it to the device): mpcbox-bench, mpcbox,
#                 the test binaries with GPU tests, and with OpenMPI (mpicc) the MPI builds
#   here:         bash bench/device.sh pack-mpi
#                 Debian's OpenMPI runtime as files in .mpi/ (carry it too for MPI runs)
#   here:         bash bench/device.sh pack-lammps
#                 LAMMPS with fix mpcbox (lmp_mpcbox, lmp_mpcbox_gather) and its libraries in
#                 .lmp/ (carry it for the `lammps` scenario: "lammps --lmp lmp_mpcbox --np 4 ...")
#   on a device:  bash bench/device.sh run JOB... (from the repository root)
#                 each argument one scenario with its options, e.g. gpu "rules --sizes 256"
#                 "multi --gpus 1,2", "production --cells 256" (the packed mpcbox beside
#                 the runner on examples/, its files in the system's temporary folder, not in
#                 $OUT); leading K=V words set the environment
#                 ("MPCBOX_CUDA_METHOD=warp gpu"); "np=2 [-x K=V]... ranks --gpus 0,1" runs it
#                 under mpirun -np 2; "tests" (or "tests=md_slabs::") runs the ignored GPU
#                 tests (TESTS_DEADLINE=560 TESTS_FIRST="walls" TESTS_SKIP="..." to split them
#                 over calls). Records go to $OUT/records/<machine>.jsonl, logs to $OUT/logs/.
#   here:         bash bench/device.sh take DIR
#                 the records fetched into DIR appended to bench/records/, then
#                 docs/performance.md written again (mpcbox-bench report)
set -euo pipefail
cd "$(dirname "$0")/.."

pack() {
  # tests that drive external tools (MPI, Python readers, NVRTC) are then ordinary tests, which
  # the device's `--ignored` runs leave out (CI runs them); built without it they would be
  # ignored ones
  export MPCBOX_REQUIRE_EXTERNAL=1
  rm -rf .gpu && mkdir -p .gpu/tests .gpu/bin
  local head; head=$(git rev-parse --short HEAD)
  [ -n "$(git status --porcelain --untracked-files=no)" ] && head="$head-dirty"
  echo "$head" > .gpu/COMMIT
  local exes='import json, sys
want_test = sys.argv[1] == "test"
for line in sys.stdin:
    try: m = json.loads(line)
    except Exception: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
       and bool(m.get("profile", {}).get("test")) == want_test:
        print(m["executable"])'
  cargo test --release -p mpcbox --no-run --message-format=json 2>/dev/null \
    | python3 -c "$exes" test | while read -r exe; do cp "$exe" .gpu/tests/; done
  cargo build --release -p mpcbox-bench -p mpcbox --bins --message-format=json 2>/dev/null \
    | python3 -c "$exes" bin | while read -r exe; do cp "$exe" .gpu/bin/; done
  if command -v mpicc >/dev/null 2>&1; then
    # own target directory: the feature rebuilds the library
    mkdir -p .gpu/mpi/examples
    cargo build --release --quiet --features mpi --bin mpcbox --example ranks_solutes \
      --target-dir target/mpi
    cargo build --release --quiet -p mpcbox-bench --features mpi --target-dir target/mpi
    cp target/mpi/release/mpcbox target/mpi/release/mpcbox-bench .gpu/mpi/
    cp target/mpi/release/examples/ranks_solutes .gpu/mpi/examples/
  fi
  strip .gpu/tests/* .gpu/bin/* .gpu/mpi/mpcbox* .gpu/mpi/examples/* 2>/dev/null || true
  # only the test binaries with GPU instances (the carry is limited)
  for t in .gpu/tests/*; do
    [ "$("$t" --list --ignored 2>/dev/null | grep -c ': test')" = 0 ] && rm "$t"
  done
  du -sh .gpu
}

gpu_tests() {
  # TESTS_DEADLINE (seconds for all modules, default 3600): modules left when it comes are
  # listed as not run, so a call under the device's per-command limit still reports;
  # TESTS_FIRST / TESTS_SKIP (module names, spaces): run those first / leave those out (the
  # second call of a split run skips what the first ran). One log of the failures only.
  local filter=$1 logs=$OUT/logs deadline=${TESTS_DEADLINE:-3600} s0; s0=$(date +%s)
  local failures=$logs/test-failures.log; : > "$failures"
  for t in .gpu/tests/*; do
    local bin; bin=$(basename "$t" | sed 's/-[0-9a-f]*$//')
    local mods=ALL
    # the integration tests are one binary (suite-*): one run per module
    if [ "$bin" = suite ]; then
      mods=$("$t" --list --ignored 2>/dev/null | grep ': test' | cut -d: -f1 | sort -u \
        | grep -E "^${filter%%::*}" || true)
      local first="" m
      for m in ${TESTS_FIRST:-}; do grep -qx "$m" <<< "$mods" && first="$first $m"; done
      mods="$first $(grep -vxF -f <(tr ' ' '\n' <<< "$first" | grep .) <<< "$mods" || echo "$mods")"
    fi
    for m in $mods; do
      case " ${TESTS_SKIP:-} " in *" $m "*) continue ;; esac
      local left=$(( deadline - ($(date +%s) - s0) ))
      if [ "$left" -lt 20 ]; then echo "NOT RUN (deadline): $m"; continue; fi
      local name=$bin f=; [ "$m" != ALL ] && { name=$m; f="$m::"; }
      local s rc=0; s=$(date +%s)
      timeout "$(( left < 300 ? left : 300 ))" "$t" --ignored --test-threads=1 $f \
        > "/tmp/t_$name.log" 2>&1 || rc=$?
      printf "%-20s rc=%-3s %4ss %s\n" "$name" "$rc" "$(( $(date +%s) - s ))" \
        "$(grep -E '^test result' "/tmp/t_$name.log" | tail -1 | cut -c14-60)"
      if [ "$rc" != 0 ]; then
        grep -E "^test .*FAILED|panicked at" "/tmp/t_$name.log" | head -6 || true
        { echo "=== $name (rc $rc)"; tail -c 20000 "/tmp/t_$name.log"; } >> "$failures"
      fi
    done
  done
}

run() {
  : "${OUT:?run on the device: OUT names the folder that comes back}"
  export MPCBOX_COMMIT; MPCBOX_COMMIT=$(cat .gpu/COMMIT 2>/dev/null || echo unknown)
  [ -f .mpi/env.sh ] && source .mpi/env.sh
  [ -f .lmp/env.sh ] && source .lmp/env.sh
  export MPCBOX_MPI_BIN=$PWD/.gpu/mpi/mpcbox
  # the command the tests run (the packed test binary's build directory is not here)
  export MPCBOX_BIN=$PWD/.gpu/bin/mpcbox
  mkdir -p "$OUT/records" "$OUT/logs"
  nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader || true
  for job in "$@"; do
    case $job in
      tests) gpu_tests "" ;;
      tests=*) gpu_tests "${job#tests=}" ;;
      np=*)
        local words; read -r -a words <<< "$job"
        local np=${words[0]#np=} opts=() i=1
        while [ "${words[$i]:-}" = -x ]; do opts+=(-x "${words[$((i + 1))]}"); i=$((i + 2)); done
        local args=("${words[@]:$i}")
        echo "== mpirun -np $np ${opts[*]} mpcbox-bench ${args[*]}"
        mpirun --bind-to none -np "$np" "${opts[@]}" .gpu/mpi/mpcbox-bench \
          --records "$OUT/records" "${args[@]}" 2>&1 | tee "$OUT/logs/${args[0]}-np$np.log" || true ;;
      *)
        local words; read -r -a words <<< "$job"
        local env=() i=0
        while [[ ${words[$i]:-} =~ ^[A-Z_][A-Z0-9_]*= ]]; do env+=("${words[$i]}"); i=$((i + 1)); done
        local args=("${words[@]:$i}")
        echo "== ${env[*]} mpcbox-bench ${args[*]}"
        env "${env[@]}" .gpu/bin/mpcbox-bench --records "$OUT/records" "${args[@]}" 2>&1 \
          | tee "$OUT/logs/${args[0]}.log" || true ;;
    esac
  done
}

pack_mpi() {
  mkdir -p .mpi
  (cd .mpi && apt-get download openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 \
    libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7 libfabric1 libucx0 libibverbs1 \
    librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2 libltdl7)
  cat > .mpi/env.sh <<'ENV'
# Debian bookworm's OpenMPI 4.1 runtime unpacked from the .deb files beside this script into
# .mpi/root (on a machine without a package registry), relocated by OPAL_PREFIX; shared memory
# between the ranks of one host (btl self,vader). `source .mpi/env.sh`.
M=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
D=$M/root
if [ ! -x "$D/usr/bin/orterun" ]; then
  mkdir -p "$D" && for f in "$M"/*.deb; do dpkg -x "$f" "$D"; done
  ln -sf orterun "$D/usr/bin/mpirun"
fi
L=$D/usr/lib/x86_64-linux-gnu
export PATH=$D/usr/bin:$PATH
export LD_LIBRARY_PATH=$L:$L/openmpi/lib:$L/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$D/usr OPAL_LIBDIR=$L/openmpi/lib OPAL_DATADIR=$D/usr/share/openmpi
export OPAL_PKGDATADIR=$D/usr/share/openmpi
export PMIX_PREFIX=$L/pmix2 PMIX_INSTALL_PREFIX=$L/pmix2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_mtl=^ofi,psm,psm2
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
export PMIX_MCA_mca_base_component_path=$L/pmix2/lib/pmix PMIX_MCA_pcompress_base_silence_warning=1
ENV
  du -sh .mpi
}

pack_lammps() {
  # LAMMPS for a machine that has none: lmp_mpcbox (this host's liblammps with fix mpcbox built
  # in, `make -C coupling/lammps driver`) and the mpcbox coupling library, with MPI (the fluid
  # over LAMMPS's ranks) and without (lib-gather/: the fluid on rank 0), and the shared
  # libraries they need beyond glibc and OpenMPI (.mpi has those) in one archive; .lmp/env.sh
  # unpacks it there and puts it on the paths. Needs liblammps-dev and mpicxx here.
  command -v mpicxx >/dev/null && pkg-config --exists liblammps \
    || { echo "pack-lammps: needs liblammps-dev and mpicxx (apt-get install liblammps-dev)"; return 1; }
  cargo build --release --quiet -p mpcbox-coupling --features mpi --target-dir target/mpi
  cargo build --release --quiet -p mpcbox-coupling
  rm -rf .lmp && mkdir -p .lmp/stage/bin .lmp/stage/lib/ranks .lmp/stage/lib/gather
  # each executable finds its own coupling library next to it ($ORIGIN), not on the path
  make -C coupling/lammps --quiet BUILD="$PWD/.lmp/build" MPCBOX_LIB_DIR="$PWD/target/mpi/release" \
    RPATH='$$ORIGIN/../lib/ranks' driver
  cp .lmp/build/lmp_mpcbox .lmp/stage/bin/
  make -C coupling/lammps --quiet BUILD="$PWD/.lmp/build-gather" \
    MPCBOX_LIB_DIR="$PWD/target/release" RPATH='$$ORIGIN/../lib/gather' driver
  cp .lmp/build-gather/lmp_mpcbox .lmp/stage/bin/lmp_mpcbox_gather
  cp target/mpi/release/libmpcbox_coupling.so .lmp/stage/lib/ranks/
  cp target/release/libmpcbox_coupling.so .lmp/stage/lib/gather/
  ldd .lmp/build/lmp_mpcbox | awk '/=> \//{print $1, $3}' \
    | grep -v -E '^(libc|libm|libdl|libpthread|librt|libresolv|libmpi|libopen-rte|libopen-pal|libhwloc|libevent[^ ]*|libmpcbox_coupling)\.so' \
    | while read -r _ f; do cp -L "$f" .lmp/stage/lib/; done
  strip .lmp/stage/bin/* .lmp/stage/lib/*/libmpcbox_coupling.so
  tar -C .lmp/stage -cJf .lmp/lammps.tar.xz . && rm -rf .lmp/stage .lmp/build .lmp/build-gather
  cat > .lmp/env.sh <<'ENV'
# lmp_mpcbox and its libraries (bench/device.sh pack-lammps), unpacked once into /tmp/lmp;
# `source .mpi/env.sh` first (OpenMPI). lmp_mpcbox: the fluid over LAMMPS's ranks;
# lmp_mpcbox_gather: the coupling library without MPI (the fluid on rank 0, atoms gathered).
R=/tmp/lmp
L=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -x $R/bin/lmp_mpcbox ] || { mkdir -p $R && tar -C $R -xJf "$L/lammps.tar.xz"; }
export PATH=$R/bin:$PATH
export LD_LIBRARY_PATH=$R/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ENV
  du -sh .lmp
}

take() {
  local from=${1:?take DIR: the folder the records were fetched into}
  mkdir -p bench/records
  find "$from" -name '*.jsonl' | while read -r f; do
    cat "$f" >> "bench/records/$(basename "$f")"
    echo "$(wc -l < "$f") records → bench/records/$(basename "$f")"
  done
  cargo run --release --quiet -p mpcbox-bench -- report
}

cmd=${1:-}; shift || true
case $cmd in
  pack) pack ;;
  pack-lammps) pack_lammps ;;
  pack-mpi) pack_mpi ;;
  run) run "$@" ;;
  take) take "$@" ;;
  *) sed -n '2,23p' "$0"; exit 2 ;;
esac
