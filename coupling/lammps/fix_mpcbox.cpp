/* fix mpcbox: set-up, unit and box checks, the global vector. The exchange with the fluid and
 * the restart files are in fix_mpcbox_exchange.cpp. */

#include "fix_mpcbox.h"

#include "atom.h"
#include "comm.h"
#include "domain.h"
#include "error.h"
#include "force.h"
#include "modify.h"
#include "update.h"
#include "utils.h"

#include "mpcbox.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace LAMMPS_NS;
using namespace FixConst;

namespace {

const char *const KEYWORDS = "every, cell, checkpoint, timing, overlap, threads";

/* A number as a person would write it (no trailing zeros). */
std::string num(double x)
{
  char buf[40];
  snprintf(buf, sizeof(buf), "%.10g", x);
  return buf;
}

/* A positive number, or why it is not one. */
bool positive(const char *text, double &out)
{
  char *end = nullptr;
  out = strtod(text, &end);
  return end != text && *end == '\0' && std::isfinite(out) && out > 0.0;
}

/* The default checkpoint name: fluid.<fix-ID>.<timestep>.mpcbox in the working directory. */
std::string default_checkpoint(const char *fix_id)
{
  return std::string("fluid.") + fix_id + ".*.mpcbox";
}

/* mpcbox adopts one communicator per process, once (mpcbox_use_mpi_comm refuses a second
 * call): the first fix mpcbox of the process hands it LAMMPS's world, later ones (after unfix
 * or clear) find it here. */
struct Adoption {
  bool tried = false;
  int status = MPCBOX_STATUS_OK;
  int comm = 0;    // the adopted communicator's Fortran handle
  std::string why;
};
Adoption adoption;

}    // namespace

FixMpcbox::FixMpcbox(LAMMPS *lmp, int narg, char **arg) :
    Fix(lmp, narg, arg), cell(1.0), solvent(nullptr), per_rank(false), cells{0.0, 0.0, 0.0},
    time_step(0.0), shear_rate(0.0), kt(0.0), fluid_mass(0.0), observed{}, moments_stale(false),
    energy_removed(0.0), threads(0), timing(false), overlap(false)
{
  parse_args(narg, arg);
  open_solvent();

  scalar_flag = 1;
  extscalar = 1;        // an energy of the whole group: thermo divides it by N with norm yes
  vector_flag = 1;
  size_vector = V_SIZE;
  extvector = 0;        // thermo prints the values as they are (no division by atom count)
  global_freq = 1;      // the fluid does not change between exchanges: always current
  restart_global = 1;   // write_restart stores where the fluid checkpoint is
  dynamic_group_allow = 0;
  // Like a thermostat, the fix moves kinetic energy between the atoms and a reservoir (the
  // fluid): by default that is LAMMPS's ecouple (econserve = etotal + ecouple); fix_modify
  // energy yes moves it into pe instead (see init).
  ecouple_flag = 1;
  energy_global_flag = 1;
  for (double &v : observed) v = NAN;    // unknown: refresh_observables fills everything
  refresh_observables();
}

FixMpcbox::~FixMpcbox()
{
  mpcbox_free(solvent);
}

int FixMpcbox::setmask()
{
  // with `overlap yes` the fluid's step is begun before the forces of each exchange step
  return overlap ? (END_OF_STEP | PRE_FORCE) : END_OF_STEP;
}

/* `overlap yes`, per rank: on an exchange step, before LAMMPS computes its forces, the fluid's
 * part of the MPC step that needs no atoms (streaming, binning) is queued on the GPUs, so that
 * it runs while the forces are computed; the exchange at the end of the step hands the atoms
 * over and finishes it (mpcbox_begin_fluid). Atoms do not move between ranks after pre_force,
 * so the count handed over then is this one. The CPU begins nothing. */
void FixMpcbox::pre_force(int)
{
  if (!per_rank || update->ntimestep % nevery != 0) return;
  const int *mask = atom->mask;
  const int nlocal = atom->nlocal;
  size_t n = 0;
  for (int i = 0; i < nlocal; i++) n += (mask[i] & groupbit) != 0;
  const double t0 = timing ? MPI_Wtime() : 0.0;
  if (mpcbox_begin_fluid(solvent, n, nullptr) != 0)
    fail_here(std::string("beginning the MPC step failed: ") + mpcbox_last_error());
  if (timing) times.begin += MPI_Wtime() - t0;
}

[[noreturn]] void FixMpcbox::fail(const std::string &message)
{
  error->all(FLERR, std::string("fix mpcbox (fix ") + id + "): " + message);
}

/* Every rank calls this with its own verdict; if any rank failed, every rank stops with the
 * message of the lowest failing one (in the gather path only rank 0, where the fluid lives,
 * can fail). For failures after which every rank gets here, not stuck in mpcbox. */
void FixMpcbox::agree(bool ok, const std::string &message)
{
  const int nprocs = comm->nprocs;
  const int mine = ok ? nprocs : comm->me;
  int first = nprocs;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world);
  if (first == nprocs) return;
  int len = static_cast<int>(message.size());
  MPI_Bcast(&len, 1, MPI_INT, first, world);
  std::string said(message);
  said.resize(len);
  if (len > 0) MPI_Bcast(&said[0], len, MPI_CHAR, first, world);
  fail(said);
}

/* A failure inside a collective solvent call of the per-rank path: the other ranks may wait
 * inside mpcbox for this one and never reach agree, so this rank stops the run alone
 * (error->one ends in MPI_Abort: every rank stops, none hangs). */
[[noreturn]] void FixMpcbox::fail_here(const std::string &message)
{
  error->one(FLERR, std::string("fix mpcbox (fix ") + id + "): " + message);
}

void FixMpcbox::parse_args(int narg, char **arg)
{
  const std::string usage =
      "usage: fix ID group mpcbox config.ron every N [cell a] [checkpoint file] [timing yes|no] "
      "[overlap yes|no] [threads N|auto]";
  if (narg < 4) fail("the config file is missing; " + usage);
  config_path = arg[3];
  checkpoint_pattern = default_checkpoint(id);
  nevery = 0;
  for (int i = 4; i < narg; i += 2) {
    const std::string key = arg[i];
    if (key != "every" && key != "cell" && key != "checkpoint" && key != "timing" &&
        key != "overlap" && key != "threads")
      fail("unknown keyword `" + key + "`; valid keywords: " + KEYWORDS + "; " + usage);
    if (i + 1 >= narg) fail("keyword `" + key + "` needs a value; " + usage);
    const char *value = arg[i + 1];
    double x = 0.0;
    if (key == "every") {
      if (!positive(value, x) || x != std::floor(x) || x > 1e9)
        fail(std::string("`every` must be a positive whole number of MD steps per MPC step (got ") +
             value + ")");
      nevery = static_cast<int>(x);
    } else if (key == "cell") {
      if (!positive(value, x))
        fail(std::string("`cell` must be the MPC cell size in LAMMPS length units, > 0 (got ") +
             value + ")");
      cell = x;
    } else if (key == "timing") {
      const std::string yes_no = value;
      if (yes_no != "yes" && yes_no != "no")
        fail("`timing` must be yes or no (got " + yes_no + ")");
      timing = yes_no == "yes";
    } else if (key == "overlap") {
      const std::string yes_no = value;
      if (yes_no != "yes" && yes_no != "no")
        fail("`overlap` must be yes or no (got " + yes_no + ")");
      overlap = yes_no == "yes";
    } else if (key == "threads") {
      if (std::string(value) == "auto") {
        threads = 0;
      } else {
        if (!positive(value, x) || x != std::floor(x) || x > 1024)
          fail(std::string("`threads` must be auto or a whole number of threads from 1 to 1024 "
                           "for the exchange loops of each rank (got ") + value + ")");
        threads = static_cast<int>(x);
      }
    } else {
      checkpoint_pattern = value;
    }
  }
  if (nevery == 0)
    fail("keyword `every` is required: the MD steps per MPC step, with every × timestep = the "
         "config's time_step; " + usage);
}

/* The per-rank exchange loops' threads: `threads N`, or (auto) this rank's share of its host's
 * cores, which wait while LAMMPS computes its MD. Made once, at the first exchange. */
ExchangeThreads &FixMpcbox::exchange_threads()
{
  if (!team) {
    int count = threads;
    if (count == 0) {
      MPI_Comm host;
      MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, comm->me, MPI_INFO_NULL, &host);
      int ranks_on_host = 1;
      MPI_Comm_size(host, &ranks_on_host);
      MPI_Comm_free(&host);
      count = ExchangeThreads::share_of_cores(ranks_on_host);
    }
    team.reset(new ExchangeThreads(count));
    const int made = team->count();    // fewer where the system gave no more
    if (comm->me == 0)
      utils::logmesg(lmp, "fix mpcbox: " + std::to_string(made) +
                              (made == 1 ? " thread" : " threads") +
                              " per rank for the exchange loops\n");
  }
  return *team;
}

/* Whether the fluid runs over LAMMPS's ranks (per rank) or on rank 0 (gather): per rank when
 * the coupling library has MPI, which is known only by asking it (mpcbox_use_mpi_comm fails
 * in a library built without). Collective; the log says which. */
bool FixMpcbox::use_ranks()
{
  const int handle = static_cast<int>(MPI_Comm_c2f(world));
  if (!adoption.tried) {
    adoption.tried = true;
    adoption.comm = handle;
    adoption.status = mpcbox_use_mpi_comm(handle);
    if (adoption.status != MPCBOX_STATUS_OK) adoption.why = mpcbox_last_error();
  }
  const bool adopted = adoption.status == MPCBOX_STATUS_OK;
  agree(!adopted || adoption.comm == handle,
        "mpcbox already runs over the MPI communicator of another LAMMPS instance of this "
        "process; fix: one LAMMPS instance with fix mpcbox per process");
  const int mine = adopted ? 1 : 0;
  int all = 0, any = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, world);
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, world);
  if (all != any)
    fail("the coupling library has MPI on some ranks and not on others; fix: load the same "
         "libmpcbox_coupling.so on every rank");
  if (comm->me == 0) {
    if (adopted)
      utils::logmesg(lmp, "fix mpcbox: per-rank exchange: the fluid runs over " +
                              std::to_string(comm->nprocs) +
                              (comm->nprocs == 1 ? " LAMMPS rank" : " LAMMPS ranks") +
                              " in mpcbox's y slabs, each rank hands over its own atoms\n");
    else {
      // a library without MPI is the usual case here, not an error: say so plainly
      const bool no_mpi = adoption.why.find("built without MPI") != std::string::npos;
      const std::string why =
          no_mpi ? "this libmpcbox_coupling.so is built without MPI; one built with "
                   "`--features mpi` runs the fluid over the LAMMPS ranks instead"
                 : "the per-rank exchange is unavailable: " + adoption.why;
      utils::logmesg(lmp, "fix mpcbox: gather exchange: the fluid runs on rank 0, the atoms "
                          "are gathered there (" +
                              why + ")\n");
    }
  }
  return adopted;
}

/* Gather path: rank 0 builds the fluid from the config file. */
void FixMpcbox::open_on_root()
{
  std::string why;
  if (comm->me == 0) {
    solvent = mpcbox_create_from_file(config_path.c_str());
    if (!solvent) why = "config " + config_path + ": " + mpcbox_last_error();
  }
  agree(why.empty(), why);
}

/* Per-rank path: every rank builds its slabs of the fluid (collective) from the config text
 * that rank 0 read: with the same text every rank fails alike or not at all, whereas a rank
 * failing alone to read the file would leave the others waiting in mpcbox's config check. */
void FixMpcbox::open_on_every_rank()
{
  std::string text, why;
  if (comm->me == 0) {
    std::ifstream in(config_path, std::ios::binary);
    std::ostringstream read;
    if (in) read << in.rdbuf();
    if (!in || in.bad())
      why = "config " + config_path + ": cannot read it (" + strerror(errno) +
            "); fix: give the path of a readable RON config file";
    text = read.str();
  }
  agree(why.empty(), why);
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, world);
  text.resize(len);
  if (len > 0) MPI_Bcast(&text[0], len, MPI_CHAR, 0, world);
  solvent = mpcbox_create_from_ron(text.c_str());
  if (!solvent)
    why = "config " + config_path + ": " + mpcbox_last_error();
  else if (mpcbox_set_solutes_per_rank(solvent, 1) != 0)
    why = std::string("handing over atoms per rank: ") + mpcbox_last_error();
  agree(why.empty(), why);
}

/* The fluid is built (on every rank, or on rank 0 alone); every rank learns its run
 * constants from rank 0. */
void FixMpcbox::open_solvent()
{
  per_rank = use_ranks();
  if (per_rank)
    open_on_every_rank();
  else
    open_on_root();
  double params[7] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  std::string why;
  if (comm->me == 0) {
    MpcboxParameters p;
    if (mpcbox_parameters(solvent, &p) != 0)
      why = std::string("reading the solvent's parameters: ") + mpcbox_last_error();
    else {
      const double read[7] = {p.box_lengths[0], p.box_lengths[1], p.box_lengths[2],
                              p.time_step,      p.shear_rate,     p.kt,
                              p.fluid_mass};
      memcpy(params, read, sizeof(params));
    }
  }
  agree(why.empty(), why);
  MPI_Bcast(params, 7, MPI_DOUBLE, 0, world);
  for (int k = 0; k < 3; k++) cells[k] = params[k];
  time_step = params[3];
  shear_rate = params[4];
  kt = params[5];
  fluid_mass = params[6];
  if (comm->me == 0)
    utils::logmesg(lmp,
                   "fix mpcbox: " + config_path + ": " + num(cells[0]) + " x " + num(cells[1]) +
                       " x " + num(cells[2]) + " cells of " + num(cell) + " length units, " +
                       std::to_string(mpcbox_fluid_particles(solvent)) +
                       " fluid particles, h = " + num(time_step) + "\n");
}

void FixMpcbox::init()
{
  // The exchanged energy goes to exactly one of LAMMPS's sums, else econserve counts it twice.
  // Modify::init calls this before it lists the fixes of each sum.
  ecouple_flag = thermo_energy ? 0 : 1;
  check_time_step();
  check_box();
  check_shear();
}

/* N MD steps must span one collision time h (LAMMPS and mpcbox share the time unit). */
void FixMpcbox::check_time_step()
{
  const double dt = update->dt;
  const double md = nevery * dt;
  if (std::fabs(md - time_step) <= 1e-9 * time_step) return;
  const double ratio = time_step / dt;
  std::string fix = "set `every` to " + num(std::round(ratio));
  if (std::fabs(ratio - std::round(ratio)) > 1e-9 * ratio || std::round(ratio) < 1.0)
    fix = "set the timestep to " + num(time_step / nevery);
  fail("`every` " + std::to_string(nevery) + " × timestep " + num(dt) + " = " + num(md) +
       " differs from the config's time_step h = " + num(time_step) + " (" + config_path +
       "); fix: " + fix + ", or time_step: " + num(md) + " in the config");
}

/* The fluid fills the periodic LAMMPS box: each edge is (config cells) × `cell`. */
void FixMpcbox::check_box()
{
  if (domain->dimension != 3 || domain->nonperiodic)
    fail("the fluid needs a 3d box periodic in x, y and z; fix: boundary p p p");
  bool same = true;
  for (int k = 0; k < 3; k++)
    same = same && std::fabs(domain->prd[k] / cell - cells[k]) <= 1e-9 * cells[k];
  if (same) return;
  fail("the LAMMPS box " + num(domain->prd[0]) + " x " + num(domain->prd[1]) + " x " +
       num(domain->prd[2]) + " is " + num(domain->prd[0] / cell) + " x " +
       num(domain->prd[1] / cell) + " x " + num(domain->prd[2] / cell) + " cells of `cell` " +
       num(cell) + ", but the config (" + config_path + ") has " + num(cells[0]) + " x " +
       num(cells[1]) + " x " + num(cells[2]) +
       " cells; fix: set `cell` to box edge / cells (" + num(domain->prd[0] / cells[0]) +
       " for x), or change the box or the config's cells");
}

/* Lees-Edwards: the only box change allowed is fix deform's xy tilt at the config's shear
 * rate, with remap v (LAMMPS then shifts vx of atoms crossing y as mpcbox does its fluid). */
void FixMpcbox::check_shear()
{
  double rate = 0.0;
  const int ideform = modify->find_fix_by_style("deform");
  if (ideform >= 0) {
    if (ideform > modify->find_fix(id))
      fail("fix deform must be defined before fix mpcbox (the fluid checks the box rates fix "
           "deform sets)");
    for (int k = 0; k < 5; k++)
      if (domain->h_rate[k] != 0.0 || (k < 3 && domain->h_ratelo[k] != 0.0))
        fail("fix deform changes more than the xy tilt; the fluid box is fixed: use only "
             "`fix deform N all xy erate RATE remap v`");
    rate = domain->h_rate[5] / domain->yprd;
    if (rate != 0.0 && !domain->deform_vremap)
      fail("fix deform shears the box without `remap v`; fix: add `remap v` so atoms crossing "
           "y change vx as the fluid's Lees-Edwards particles do");
  }
  if (std::fabs(rate - shear_rate) <= 1e-9 * std::fmax(std::fabs(rate), std::fabs(shear_rate)))
    return;
  if (ideform < 0)
    fail("the config's shear_rate is " + num(shear_rate) +
         " but the LAMMPS box is not sheared; fix: add `fix ID all deform 1 xy erate " +
         num(shear_rate) + " remap v` before fix mpcbox, or shear_rate: 0.0 in the config");
  fail("fix deform shears at " + num(rate) + " (xy tilt rate / yprd) but the config's "
       "shear_rate is " + num(shear_rate) + "; fix: use the same rate in both");
}

/* The fluid's Lees-Edwards offset after `fluid_steps` steps must equal the LAMMPS box tilt
 * (modulo the box length): both place the periodic image above the box. "" when they agree. */
std::string FixMpcbox::lees_edwards_mismatch(uint64_t fluid_steps) const
{
  const double lx = cells[0];
  const double offset = std::fmod(shear_rate * cells[1] * (fluid_steps * time_step), lx);
  const double tilt = domain->triclinic ? domain->xy / cell : 0.0;
  const double diff = std::remainder(tilt - offset, lx);
  if (std::fabs(diff) <= 1e-6) return "";
  return "at step " + std::to_string(update->ntimestep) + " the LAMMPS box tilt xy = " +
         num(tilt) + " cells and the fluid's Lees-Edwards offset " + num(offset) +
         " cells (shear_rate × Ly × t, t = " + num(fluid_steps * time_step) +
         ") disagree; fix: start fix deform and fix mpcbox together on an untilted box, at a "
         "step that is a multiple of `every`";
}

void FixMpcbox::setup(int)
{
  std::string why;
  // per rank every rank has the fluid's step count (the same everywhere)
  if (per_rank || comm->me == 0) why = lees_edwards_mismatch(mpcbox_step_count(solvent));
  agree(why.empty(), why);
  refresh_observables();
  timing_start_run();
}

/* The fluid's observables in LAMMPS units (measured by every rank together in the per-rank
 * path, else by rank 0; every rank gets rank 0's values). Never NaN:
 * kT and the stresses are measured only by a collision (the stresses only under shear, on the
 * fluid's sampled steps), so between measurements they keep the last value, which the restart
 * record carries across read_restart; before the first collision kT comes from the fluid's
 * kinetic energy about its centre of mass, and the stresses are 0. */
void FixMpcbox::refresh_observables()
{
  std::string why;
  if (per_rank || comm->me == 0) {
    MpcboxObservables o;
    if (mpcbox_observables(solvent, &o) != 0) {
      why = std::string("reading the fluid's observables: ") + mpcbox_last_error();
      if (per_rank) fail_here(why);    // a reduction over ranks: the others may wait in it
    } else {
      const double energy = energy_unit(), stress = stress_unit();
      observed[V_STEPS] = static_cast<double>(o.step);
      if (std::isfinite(o.temperature))
        observed[V_KT] = o.temperature * energy;
      else if (!std::isfinite(observed[V_KT]))
        observed[V_KT] =
            kt_from_moments(o.momentum, o.kinetic_energy, static_cast<double>(o.particles)) *
            energy;
      observed[V_KINETIC] = o.kinetic_energy * energy;
      for (int k = 0; k < 3; k++) observed[V_PX + k] = o.momentum[k] * cell;
      const double measured[2] = {o.stress_xy_kinetic, o.stress_xy_collisional};
      for (int k = 0; k < 2; k++) {
        double &held = observed[V_STRESS_KIN + k];
        if (std::isfinite(measured[k]))
          held = measured[k] * stress;
        else if (!std::isfinite(held))
          held = 0.0;
      }
    }
  }
  agree(why.empty(), why);
  MPI_Bcast(observed, V_SIZE, MPI_DOUBLE, 0, world);
  moments_stale = false;
}

/* After an exchange: what the collision measured (kT; the stresses on the fluid's sampled
 * steps), kept now so that no measurement is lost between reads of the vector; the sums over
 * the fluid wait for the next read (refresh_observables, which keeps these values where it
 * finds none newer). Local: over ranks every rank holds the same values. */
void FixMpcbox::note_collision()
{
  moments_stale = true;
  if (!per_rank && comm->me != 0) return;
  MpcboxObservables o;
  if (mpcbox_last_collision(solvent, &o) != 0)
    fail_here(std::string("reading the fluid's last collision: ") + mpcbox_last_error());
  const double energy = energy_unit(), stress = stress_unit();
  observed[V_STEPS] = static_cast<double>(o.step);
  if (std::isfinite(o.temperature)) observed[V_KT] = o.temperature * energy;
  const double measured[2] = {o.stress_xy_kinetic, o.stress_xy_collisional};
  for (int k = 0; k < 2; k++)
    if (std::isfinite(measured[k])) observed[V_STRESS_KIN + k] = measured[k] * stress;
}

double FixMpcbox::energy_unit() const
{
  return cell * cell * force->mvv2e;
}

double FixMpcbox::stress_unit() const
{
  return force->mvv2e * force->nktv2p / cell;
}

/* kT (MPC units) from the fluid's kinetic energy about its centre of mass, 3(N − 1) degrees of
 * freedom: exactly the config's kT for a fresh fluid at rest (mpcbox draws it so); a mean
 * flow such as a steady shear profile counts as heat here. */
double FixMpcbox::kt_from_moments(const double momentum[3], double kinetic,
                                  double particles) const
{
  if (particles < 2.0 || fluid_mass <= 0.0) return kt;
  const double p2 = momentum[0] * momentum[0] + momentum[1] * momentum[1] +
                    momentum[2] * momentum[2];
  return (2.0 * kinetic - p2 / (particles * fluid_mass)) / (3.0 * (particles - 1.0));
}

/* The kinetic energy the exchanges took from the atoms since the fix was defined; a restart
 * file carries it on, so that ecouple (or pe) continues across read_restart. */
double FixMpcbox::compute_scalar()
{
  return energy_removed;
}

/* LAMMPS reads a fix's global values on every rank together (thermo, fix ave/time, variables),
 * so the sums over the fluid that an exchange left stale can be measured here. */
double FixMpcbox::compute_vector(int i)
{
  if (moments_stale) refresh_observables();
  return (i >= 0 && i < V_SIZE) ? observed[i] : 0.0;
}
