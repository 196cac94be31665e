/* fix mpcbox: the exchange with the fluid every N steps, and the fluid's part of LAMMPS restart
 * files. */

#include "fix_mpcbox.h"

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "update.h"
#include "utils.h"

#include "mpcbox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace LAMMPS_NS;

namespace {

const int PACKED = 8;    // tag, x[3], v[3], mass per atom
const int CHUNK = 64;    // local atoms per chunk of the per-rank loops (several in a small test)
// Restart record: magic, fluid step count, then (version 2) the exchanged energy and the
// global vector, then the checkpoint path. Version 1 records (no energy, no vector) still read.
const char RESTART_MAGIC[8] = {'M', 'P', 'C', 'B', 'O', 'X', 'R', '2'};
const char RESTART_MAGIC_V1[8] = {'M', 'P', 'C', 'B', 'O', 'X', 'R', '1'};

// `rows` atoms' positions and velocities (rows of 3, LAMMPS units) into MPC units (lengths in
// cells of `cell`, from the box corner `lo`); a cell of one length unit (the usual case)
// divides by nothing (x / 1 == x).
inline void pack_rows(const double *x, const double *v, int rows, const double lo[3], double cell,
                      double *pos, double *vel)
{
  if (cell == 1.0) {
    for (int i = 0; i < rows; i++)
      for (int k = 0; k < 3; k++) pos[3 * i + k] = x[3 * i + k] - lo[k];
    std::memcpy(vel, v, sizeof(double) * 3 * static_cast<size_t>(rows));
    return;
  }
  for (int i = 0; i < rows; i++)
    for (int k = 0; k < 3; k++) {
      pos[3 * i + k] = (x[3 * i + k] - lo[k]) / cell;
      vel[3 * i + k] = v[3 * i + k] / cell;
    }
}

// The new velocities (MPC units) of `rows` atoms back into LAMMPS's v; returns
// Σ m (v_before² − v_after²) over them, summed in row order (per atom, so that the difference
// is exact).
inline double unpack_rows(const double *vel, const double *mass, int rows, double cell, double *v)
{
  double twice = 0.0;
  for (int i = 0; i < rows; i++) {
    double dv2 = 0.0;
    for (int k = 0; k < 3; k++) {
      const double after = vel[3 * i + k] * cell;
      dv2 += v[3 * i + k] * v[3 * i + k] - after * after;
      v[3 * i + k] = after;
    }
    twice += mass[i] * dv2;
  }
  return twice;
}

}    // namespace

void FixMpcbox::end_of_step()
{
  timing_start_exchange();
  if (per_rank) {
    energy_removed += step_per_rank();
    timing_lap(times.unpack);
  } else {
    // timed as: the gather (pack), rank 0's step with its ordering (mpcbox_step), the scatter
    const int mine = gather_group();
    timing_lap(times.pack);
    std::string why;
    double removed = 0.0;
    if (comm->me == 0) why = step_on_root(static_cast<int>(gathered.size() / PACKED), removed);
    agree(why.empty(), why);
    MPI_Bcast(&removed, 1, MPI_DOUBLE, 0, world);
    energy_removed += removed;
    timing_lap(times.step);
    scatter_velocities(mine);
    timing_lap(times.unpack);
  }
  note_collision();
  timing_lap(times.observe);
}

/* Per-rank path: one MPC step (every rank together) with this rank's group atoms in MPC units;
 * mpcbox takes each to the rank that owns its cell and brings its new velocity back here.
 * Returns the kinetic energy the exchange took from all the group's atoms (as step_on_root).
 * The atoms go in LAMMPS's local order, not by ID: over ranks the order of the sums inside a
 * cell changes anyway, so results match other decompositions to rounding, not bitwise. */
double FixMpcbox::step_per_rank()
{
  // the step count and the box tilt are the same on every rank, and so is the verdict: no
  // agreement over the ranks is needed (a collective less per exchange), and a rank that found
  // a mismatch alone would stop every rank (error->one aborts the run)
  const std::string mismatch = lees_edwards_mismatch(mpcbox_step_count(solvent) + 1);
  if (!mismatch.empty()) fail_here(mismatch);
  const int *mask = atom->mask;
  const int nlocal = atom->nlocal;
  // sized for LAMMPS's own room for atoms on this rank (atom->nmax, local and ghost), filled by
  // index; n of them are the group's. Page-locked memory is slow to allocate and free (sized
  // to nlocal, the first exchange after the count grew stalled on the reallocation), so they grow
  // only when LAMMPS grows its own.
  if (static_cast<int>(mass.size()) < nlocal) {
    const size_t room = static_cast<size_t>(std::max(nlocal, atom->nmax));
    pos.resize(3 * room);
    vel.resize(3 * room);
    mass.resize(room);
  }
  const double lo[3] = {domain->boxlo[0], domain->boxlo[1], domain->boxlo[2]};
  const double *rmass = atom->rmass_flag ? atom->rmass : nullptr;
  const double *type_mass = atom->mass;
  const int *type = atom->type;
  // LAMMPS keeps x and v as one block of nmax × 3 doubles (x[i] == x[0] + 3 i): read flat, as
  // the compiler cannot see through x[i].
  const double *xs = nlocal > 0 ? atom->x[0] : nullptr;
  double *vs = nlocal > 0 ? atom->v[0] : nullptr;
  // The local atoms go in fixed chunks, CHUNK atoms each, spread over the fix's threads
  // (`threads`): each chunk's group atoms fill the places after those of the chunks before,
  // and the energy is summed per chunk and then in chunk order, so that neither depends on the
  // number of threads. One core's memory bandwidth bounded these loops on a many-core host.
  const int chunks = (nlocal + CHUNK - 1) / CHUNK;
  chunk_first.assign(static_cast<size_t>(chunks) + 1, 0);
  ExchangeThreads &team = exchange_threads();
  team.run(chunks, [&](int c) {
    const int hi = std::min(nlocal, (c + 1) * CHUNK);
    size_t in_group = 0;
    for (int i = c * CHUNK; i < hi; i++) in_group += (mask[i] & groupbit) != 0;
    chunk_first[c + 1] = in_group;
  });
  for (int c = 0; c < chunks; c++) chunk_first[c + 1] += chunk_first[c];
  const size_t n = chunk_first[chunks];
  if (timing) times.count += MPI_Wtime() - times.mark;
  team.run(chunks, [&](int c) {
    const int first = c * CHUNK, hi = std::min(nlocal, (c + 1) * CHUNK);
    const size_t j = chunk_first[c];
    if (chunk_first[c + 1] - j == static_cast<size_t>(hi - first)) {
      // the whole chunk is in the group (the usual case): rows copied as they lie, without a
      // test per atom (a third faster on few threads, where these loops bound the exchange)
      pack_rows(xs + 3 * first, vs + 3 * first, hi - first, lo, cell, &pos[3 * j], &vel[3 * j]);
      for (int i = first; i < hi; i++) mass[j + (i - first)] = rmass ? rmass[i] : type_mass[type[i]];
      return;
    }
    size_t g = j;
    for (int i = first; i < hi; i++) {
      if (!(mask[i] & groupbit)) continue;
      pack_rows(xs + 3 * i, vs + 3 * i, 1, lo, cell, &pos[3 * g], &vel[3 * g]);
      mass[g] = rmass ? rmass[i] : type_mass[type[i]];
      g++;
    }
  });
  timing_lap(times.pack);
  if (mpcbox_step(solvent, n, pos.data(), vel.data(), mass.data()) != 0)
    fail_here(std::string("the MPC step failed: ") + mpcbox_last_error());
  timing_lap(times.step);
  // Σ m (v_before² − v_after²) per chunk (unpack_rows), then in chunk order
  chunk_twice.assign(static_cast<size_t>(chunks), 0.0);
  team.run(chunks, [&](int c) {
    const int first = c * CHUNK, hi = std::min(nlocal, (c + 1) * CHUNK);
    const size_t j = chunk_first[c];
    if (chunk_first[c + 1] - j == static_cast<size_t>(hi - first)) {
      chunk_twice[c] = unpack_rows(&vel[3 * j], &mass[j], hi - first, cell, vs + 3 * first);
      return;
    }
    double twice = 0.0;
    size_t g = j;
    for (int i = first; i < hi; i++) {
      if (!(mask[i] & groupbit)) continue;
      twice += unpack_rows(&vel[3 * g], &mass[g], 1, cell, vs + 3 * i);
      g++;
    }
    chunk_twice[c] = twice;
  });
  double twice = 0.0;
  for (int c = 0; c < chunks; c++) twice += chunk_twice[c];
  double total = 0.0;
  MPI_Allreduce(&twice, &total, 1, MPI_DOUBLE, MPI_SUM, world);
  return 0.5 * force->mvv2e * total;
}

/* order[j]: the gathered row of the j-th smallest atom ID. IDs that fill a range without a
 * gap (the usual case: the whole system, or a group created in one piece) are placed
 * directly, in O(N); otherwise (gaps, or a repeated ID) they are sorted. */
void FixMpcbox::order_by_tag(int total)
{
  order.resize(total);
  if (total == 0) return;
  double lo = gathered[0], hi = gathered[0];
  for (int j = 1; j < total; j++) {
    lo = std::min(lo, gathered[j * PACKED]);
    hi = std::max(hi, gathered[j * PACKED]);
  }
  if (hi - lo + 1.0 == static_cast<double>(total)) {
    std::fill(order.begin(), order.end(), -1);
    bool dense = true;
    for (int j = 0; j < total && dense; j++) {
      int &slot = order[static_cast<int>(gathered[j * PACKED] - lo)];
      dense = slot < 0;
      slot = j;
    }
    if (dense) return;
  }
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [this](int a, int b) { return gathered[a * PACKED] < gathered[b * PACKED]; });
}

/* Pack this rank's group atoms and gather them on rank 0. Returns the local count. The
 * positions are those LAMMPS integrates (inside the box up to the neighbor skin): under
 * Lees-Edwards shear with `remap v` the stored velocity belongs to the stored position, and
 * mpcbox wraps positions outside the box as their Lees-Edwards images. */
int FixMpcbox::gather_group()
{
  double **x = atom->x, **v = atom->v;
  const int *mask = atom->mask;
  packed.clear();
  for (int i = 0; i < atom->nlocal; i++) {
    if (!(mask[i] & groupbit)) continue;
    const double m = atom->rmass_flag ? atom->rmass[i] : atom->mass[atom->type[i]];
    const double row[PACKED] = {static_cast<double>(atom->tag[i]), x[i][0], x[i][1], x[i][2],
                                v[i][0], v[i][1], v[i][2], m};
    packed.insert(packed.end(), row, row + PACKED);
  }
  const int mine = static_cast<int>(packed.size() / PACKED);
  const int ranks = comm->nprocs;
  counts.assign(ranks, 0);
  displs.assign(ranks, 0);
  const int send = mine * PACKED;
  MPI_Gather(&send, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, world);
  if (comm->me == 0) std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  const int total = comm->me == 0 ? displs[ranks - 1] + counts[ranks - 1] : 0;
  gathered.resize(total);
  MPI_Gatherv(packed.data(), send, MPI_DOUBLE, gathered.data(), counts.data(), displs.data(),
              MPI_DOUBLE, 0, world);
  return mine;
}

/* Rank 0: one MPC step with the gathered atoms, ordered by atom ID (so the result does not
 * depend on the domain decomposition), in MPC units (lengths in cells). `removed`: the atoms'
 * kinetic energy before minus after (LAMMPS energy units). */
std::string FixMpcbox::step_on_root(int total, double &removed)
{
  const std::string mismatch = lees_edwards_mismatch(mpcbox_step_count(solvent) + 1);
  if (!mismatch.empty()) return mismatch;
  order_by_tag(total);
  pos.resize(3 * total);
  vel.resize(3 * total);
  mass.resize(total);
  for (int j = 0; j < total; j++) {
    const double *row = &gathered[order[j] * PACKED];
    for (int k = 0; k < 3; k++) {
      pos[3 * j + k] = (row[1 + k] - domain->boxlo[k]) / cell;
      vel[3 * j + k] = row[4 + k] / cell;
    }
    mass[j] = row[7];
  }
  if (mpcbox_step(solvent, total, pos.data(), vel.data(), mass.data()) != 0)
    return std::string("the MPC step failed: ") + mpcbox_last_error();
  vel_back.resize(3 * total);
  double twice = 0.0;    // Σ m (v_before² − v_after²) per chunk (unpack_rows), then in chunk order
  for (int j = 0; j < total; j++) {
    const double *row = &gathered[order[j] * PACKED];
    double dv2 = 0.0;
    for (int k = 0; k < 3; k++) {
      const double after = vel[3 * j + k] * cell;
      vel_back[3 * order[j] + k] = after;
      dv2 += row[4 + k] * row[4 + k] - after * after;
    }
    twice += row[7] * dv2;
  }
  removed = 0.5 * force->mvv2e * twice;
  return "";
}

/* Send each rank its atoms' new velocities, in the order it packed them. */
void FixMpcbox::scatter_velocities(int mine)
{
  const int ranks = comm->nprocs;
  if (comm->me == 0)
    for (int r = 0; r < ranks; r++) {
      counts[r] = counts[r] / PACKED * 3;
      displs[r] = displs[r] / PACKED * 3;
    }
  vel_mine.resize(3 * mine);
  MPI_Scatterv(vel_back.data(), counts.data(), displs.data(), MPI_DOUBLE, vel_mine.data(),
               3 * mine, MPI_DOUBLE, 0, world);
  double **v = atom->v;
  const int *mask = atom->mask;
  int j = 0;
  for (int i = 0; i < atom->nlocal; i++) {
    if (!(mask[i] & groupbit)) continue;
    for (int k = 0; k < 3; k++) v[i][k] = vel_mine[3 * j + k];
    j++;
  }
}

/* write_restart: the fluid goes to its own checkpoint file (large; written atomically by
 * mpcbox), the LAMMPS restart file records its name and the fluid's step count. LAMMPS calls
 * this on every rank (fp only on rank 0). */
void FixMpcbox::write_restart(FILE *fp)
{
  if (moments_stale) refresh_observables();    // every rank: the record holds the vector
  if (!per_rank && comm->me != 0) return;
  std::string path = checkpoint_pattern;
  const size_t star = path.find('*');
  if (star != std::string::npos) path.replace(star, 1, std::to_string(update->ntimestep));
  // replaced like LAMMPS replaces its restart files (a rerun in the same directory)
  const bool saved = mpcbox_checkpoint_overwrite(solvent, path.c_str()) == 0;
  const std::string why =
      saved ? "" : "writing the fluid checkpoint " + path + ": " + mpcbox_last_error();
  // per rank the save is collective (every rank's slabs gathered, rank 0 writes the file):
  // a failed write on rank 0 comes after the collective part, so every rank can agree
  if (per_rank)
    agree(saved, why);
  else if (!saved)
    error->one(FLERR, std::string("fix mpcbox (fix ") + id + "): " + why);
  if (comm->me != 0) return;
  const uint64_t steps = mpcbox_step_count(solvent);
  std::vector<char> record(sizeof(RESTART_MAGIC) + sizeof(steps) + sizeof(energy_removed) +
                           sizeof(observed));
  char *at = record.data();
  memcpy(at, RESTART_MAGIC, sizeof(RESTART_MAGIC));
  at += sizeof(RESTART_MAGIC);
  memcpy(at, &steps, sizeof(steps));
  at += sizeof(steps);
  memcpy(at, &energy_removed, sizeof(energy_removed));
  at += sizeof(energy_removed);
  memcpy(at, observed, sizeof(observed));
  record.insert(record.end(), path.begin(), path.end());
  record.push_back('\0');
  const int size = static_cast<int>(record.size());
  fwrite(&size, sizeof(int), 1, fp);
  fwrite(record.data(), 1, record.size(), fp);
  utils::logmesg(lmp, "fix mpcbox: fluid at MPC step " + std::to_string(steps) +
                          " written to " + path + "\n");
}

/* read_restart + the same fix command: put the fluid back from the checkpoint the restart file
 * names (the fix's config supplies everything else, as for `mpcbox run --resume`), with the
 * exchanged energy and the last measured kT and stresses, so that thermo output continues. */
void FixMpcbox::restart(char *buf)
{
  const bool v1 = memcmp(buf, RESTART_MAGIC_V1, sizeof(RESTART_MAGIC_V1)) == 0;
  if (!v1 && memcmp(buf, RESTART_MAGIC, sizeof(RESTART_MAGIC)) != 0)
    fail("the restart file's fix mpcbox record is not one this plugin wrote");
  uint64_t steps = 0;
  const char *at = buf + sizeof(RESTART_MAGIC);
  memcpy(&steps, at, sizeof(steps));
  at += sizeof(steps);
  if (v1) {
    for (double &v : observed) v = NAN;    // not recorded: estimated again after the restore
  } else {
    memcpy(&energy_removed, at, sizeof(energy_removed));
    at += sizeof(energy_removed);
    memcpy(observed, at, sizeof(observed));
    at += sizeof(observed);
  }
  const std::string path(at);
  std::string why;
  // per rank every rank reads the checkpoint and keeps its own layers (nothing collective)
  if (per_rank || comm->me == 0) {
    if (mpcbox_restore(solvent, path.c_str()) != 0)
      why = "restoring the fluid from " + path + " (named by the restart file): " +
            mpcbox_last_error() + "; fix: keep the fluid checkpoint beside the restart file";
    else if (mpcbox_step_count(solvent) != steps)
      why = "the fluid checkpoint " + path + " is at MPC step " +
            std::to_string(mpcbox_step_count(solvent)) + " but the restart file was written at " +
            std::to_string(steps) + "; fix: use the checkpoint written with this restart file "
            "(a `*` in the `checkpoint` keyword keeps one per timestep)";
    else if (comm->me == 0)
      utils::logmesg(lmp, "fix mpcbox: fluid restored from " + path + " at MPC step " +
                              std::to_string(steps) + "\n");
  }
  agree(why.empty(), why);
  refresh_observables();
}
