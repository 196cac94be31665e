/* fix mpcbox: an MPC-SRD solvent (mpcbox, through its C ABI) for a group of LAMMPS atoms.
 *
 *   fix ID group-ID mpcbox config.ron every N [cell a] [checkpoint file] [timing yes|no]
 *       [overlap yes|no] [threads N|auto]
 *
 * Every N steps the group's positions, velocities and masses go to mpcbox, which streams the
 * fluid over one collision time h = N·dt, collides the atoms with the fluid of their cells and
 * returns their velocities. With a coupling library built with MPI (`--features mpi`) the
 * fluid runs over LAMMPS's ranks in mpcbox's own y slabs and each rank hands over the atoms it
 * holds; otherwise it lives on rank 0 (on its GPU when it has one), the atoms are gathered there
 * and their velocities scattered back. See docs/lammps.md. */

#ifndef MPCBOX_FIX_MPCBOX_H
#define MPCBOX_FIX_MPCBOX_H

#include "fix.h"

#include "exchange_threads.h"

#include "mpcbox.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace LAMMPS_NS {

/* Storage for the arrays handed to mpcbox_step: page-locked where a CUDA GPU is usable, so that
 * a fluid on GPUs copies them by DMA straight from and into them (mpcbox_host_alloc). */
template <class T> struct MpcboxHostAllocator {
  using value_type = T;
  MpcboxHostAllocator() = default;
  template <class U> MpcboxHostAllocator(const MpcboxHostAllocator<U> &) {}
  T *allocate(std::size_t n)
  {
    void *p = mpcbox_host_alloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t) { mpcbox_host_free(p); }
  template <class U> bool operator==(const MpcboxHostAllocator<U> &) const { return true; }
  template <class U> bool operator!=(const MpcboxHostAllocator<U> &) const { return false; }
};
using MpcboxArray = std::vector<double, MpcboxHostAllocator<double>>;

class FixMpcbox : public Fix {
 public:
  FixMpcbox(class LAMMPS *, int, char **);
  ~FixMpcbox() override;
  int setmask() override;
  void init() override;
  void setup(int) override;
  void pre_force(int) override;
  void end_of_step() override;
  double compute_scalar() override;
  double compute_vector(int) override;
  void write_restart(FILE *) override;
  void restart(char *) override;
  void post_run() override;

  /* Entries of the global vector (LAMMPS units; see docs/lammps.md). */
  enum { V_STEPS, V_KT, V_KINETIC, V_PX, V_PY, V_PZ, V_STRESS_KIN, V_STRESS_COLL, V_SIZE };

 private:
  std::string config_path;
  std::string checkpoint_pattern;    // '*' is replaced by the timestep
  double cell;                       // MPC cell size a in LAMMPS length units
  MpcboxSolvent *solvent;            // on every rank (per_rank), else on rank 0 only
  // Whether mpcbox runs over `world` and each rank steps it with its own atoms (the coupling
  // library has MPI); false: the gather-to-rank-0 path. The same on every rank.
  bool per_rank;

  // The solvent's run constants (broadcast to every rank).
  double cells[3];
  double time_step, shear_rate, kt, fluid_mass;

  // The global vector. kT and the stresses hold their last measured values between
  // measurements and across restarts (the restart record keeps them); see refresh_observables.
  // The fluid's kinetic energy and momentum are sums over every fluid particle: measured when
  // the vector is read after an exchange (moments_stale), not at every exchange.
  double observed[V_SIZE];
  bool moments_stale;

  // Kinetic energy the exchanges took from the group's atoms, summed over the run (LAMMPS
  // energy units): the global scalar, LAMMPS's ecouple (or pe with fix_modify energy yes).
  double energy_removed;

  // Exchange buffers. Per local group atom: tag, x[3], v[3], mass. Root: every rank's atoms
  // (gathered), the same sorted by tag in MPC units, and velocities back in gathered order.
  // Per rank: pos, vel, mass hold this rank's group atoms in MPC units; they are what
  // mpcbox_step reads and writes, so they live in page-locked memory where a GPU is usable.
  std::vector<double> packed, gathered, vel_back, vel_mine;
  MpcboxArray pos, vel, mass;
  std::vector<int> counts, displs, order;
  // Per-rank loops, per chunk of local atoms: where its group atoms start, its energy sum.
  std::vector<size_t> chunk_first;
  std::vector<double> chunk_twice;
  // `threads`: how many run those loops (0: auto, this rank's share of its host's cores), and
  // the threads themselves (made at the first per-rank exchange)
  int threads;
  std::unique_ptr<ExchangeThreads> team;
  ExchangeThreads &exchange_threads();

  // `timing yes`: seconds this rank spent in each part of the exchanges of the current run
  // (fix_mpcbox_timing.cpp); `mark` is where the part now running began.
  bool timing;
  // `overlap yes`: the fluid's step begun in pre_force of each exchange step (default no: with
  // a GPU per rank on four GPUs LAMMPS's MD was slower by more than the exchange saved; on one
  // or two GPUs it was not, docs/coupling-costs.md)
  bool overlap;
  struct ExchangeTimes {
    double pack = 0.0, step = 0.0, unpack = 0.0, observe = 0.0, mark = 0.0, run_start = 0.0;
    double begin = 0.0;    // in pre_force (`overlap yes`), outside the exchanges: part of md
    double count = 0.0;    // of pack: the Lees-Edwards check and the count of the group atoms
    long exchanges = 0;
  } times;
  void timing_start_run();
  void timing_start_exchange();
  void timing_lap(double &part);

  void parse_args(int narg, char **arg);
  void open_solvent();
  [[noreturn]] void fail(const std::string &message);
  [[noreturn]] void fail_here(const std::string &message);
  void agree(bool ok, const std::string &message);
  bool use_ranks();
  void open_on_root();
  void open_on_every_rank();
  void check_time_step();
  void check_box();
  void check_shear();
  std::string lees_edwards_mismatch(uint64_t fluid_steps) const;
  int gather_group();
  std::string step_on_root(int total, double &removed);
  void scatter_velocities(int mine);
  void order_by_tag(int total);
  double step_per_rank();
  void refresh_observables();
  void note_collision();
  // The fluid's units in LAMMPS's: energy m (a/τ)², xy stress.
  double energy_unit() const;
  double stress_unit() const;
  double kt_from_moments(const double momentum[3], double kinetic, double particles) const;
};

}    // namespace LAMMPS_NS

#endif
