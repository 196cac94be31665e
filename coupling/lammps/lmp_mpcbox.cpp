/* lmp_mpcbox: LAMMPS (the installed liblammps) with fix mpcbox built in.
 *
 *   mpirun -np 4 lmp_mpcbox -in in.polymer -log none
 *
 * Takes the same command-line arguments as lmp. For a LAMMPS that has neither the PLUGIN
 * package nor a usable PYTHON package (the loader mpcbox_plugin.lmp needs one of them), e.g.
 * on a machine that has liblammps but not the Python it was built with. */

#include "input.h"
#include "lammps.h"
#include "lammpsplugin.h"

#include <mpi.h>

// mpcbox_plugin.cpp
extern "C" void lammpsplugin_init(void *lmp, void *handle, void *regfunc);
extern "C" void mpcbox_lammps_register(lammpsplugin_t *plugin, void *lmp);

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  auto *lmp = new LAMMPS_NS::LAMMPS(argc, argv, MPI_COMM_WORLD);
  lammpsplugin_init(lmp, nullptr, reinterpret_cast<void *>(&mpcbox_lammps_register));
  lmp->input->file();
  delete lmp;
  MPI_Finalize();
  return 0;
}
