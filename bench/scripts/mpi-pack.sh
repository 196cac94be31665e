#!/usr/bin/env bash
# Debian's OpenMPI runtime as files for the device machine (no package registry there):
# downloads the .deb files into .mpi/ (git-ignored) and writes .mpi/env.sh, which unpacks them
# into .mpi/root on first use and sets PATH, LD_LIBRARY_PATH and the relocation variables.
# Then carry ".mpi" with ".gpu" and begin a run with `source .mpi/env.sh`.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
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
