/* The plugin entry points of fix mpcbox.
 *
 * `plugin load mpcboxplugin.so` (LAMMPS with the PLUGIN package) opens this file and calls
 * lammpsplugin_init with LAMMPS's registration function. A LAMMPS without the PLUGIN package
 * (Debian 12's 29 Sep 2021 build has no `plugin` command) loads it through the generated
 * mpcbox_plugin.lmp, which takes the same steps from the PYTHON package and passes
 * mpcbox_lammps_register, below, as the registration function. */

#include "lammpsplugin.h"

#include "comm.h"
#include "fix_mpcbox.h"
#include "lammps.h"
#include "modify.h"
#include "utils.h"

#include <cstring>
#include <string>

#ifndef MPCBOX_LAMMPS_VERSION
#define MPCBOX_LAMMPS_VERSION "unknown"
#endif

using namespace LAMMPS_NS;

static Fix *create_fix_mpcbox(LAMMPS *lmp, int narg, char **arg)
{
  return new FixMpcbox(lmp, narg, arg);
}

extern "C" void lammpsplugin_init(void *lmp, void *handle, void *regfunc)
{
  lammpsplugin_t plugin;
  plugin.version = MPCBOX_LAMMPS_VERSION;
  plugin.style = "fix";
  plugin.name = "mpcbox";
  plugin.info = "fix mpcbox: MPC-SRD solvent for a group of atoms";
  plugin.author = "the mpcbox developers";
  plugin.creator.v2 = reinterpret_cast<lammpsplugin_factory2 *>(&create_fix_mpcbox);
  plugin.handle = handle;
  reinterpret_cast<lammpsplugin_regfunc>(regfunc)(&plugin, lmp);
}

/* Registration for a LAMMPS without the PLUGIN package: enter the fix style in the table that
 * the `fix` command looks styles up in. */
extern "C" void mpcbox_lammps_register(lammpsplugin_t *plugin, void *ptr)
{
  LAMMPS *lmp = static_cast<LAMMPS *>(ptr);
  if (std::strcmp(plugin->style, "fix") != 0) return;
  (*lmp->modify->fix_map)[plugin->name] =
      reinterpret_cast<Modify::FixCreator>(plugin->creator.v2);
  if (lmp->comm->me == 0)
    utils::logmesg(lmp, std::string("Loading plugin: ") + plugin->info + " by " +
                            plugin->author + "\n");
}
