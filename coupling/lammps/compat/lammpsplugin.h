/* The LAMMPS plugin interface, for builds against a LAMMPS install without the PLUGIN
 * package's header (Debian 12's liblammps-dev ships no lammpsplugin.h). This is the interface
 * the LAMMPS manual documents under "Writing plugins" (LAMMPS 8 Apr 2021 and later): a plugin
 * file exports lammpsplugin_init(lmp, handle, regfunc), which fills one record per style and
 * hands it to regfunc. A LAMMPS install that has lammpsplugin.h is found first on the include
 * path. */
#ifndef MPCBOX_COMPAT_LAMMPSPLUGIN_H
#define MPCBOX_COMPAT_LAMMPSPLUGIN_H

extern "C" {

typedef void *(lammpsplugin_factory1)(void *lmp);
typedef void *(lammpsplugin_factory2)(void *lmp, int narg, char **arg);

typedef struct {
  const char *version;    /* LAMMPS version the plugin was compiled for */
  const char *style;      /* "fix", "pair", "command", ... */
  const char *name;       /* the style name in input scripts */
  const char *info;
  const char *author;
  union {
    lammpsplugin_factory1 *v1;    /* pair, bond, ..., command styles */
    lammpsplugin_factory2 *v2;    /* fix, compute, region styles */
  } creator;
  void *handle;    /* the dlopen() handle of the plugin file */
} lammpsplugin_t;

typedef void (*lammpsplugin_regfunc)(lammpsplugin_t *plugin, void *lmp);
typedef void (*lammpsplugin_initfunc)(void *lmp, void *handle, void *regfunc);

void lammpsplugin_init(void *lmp, void *handle, void *regfunc);
}

#endif
