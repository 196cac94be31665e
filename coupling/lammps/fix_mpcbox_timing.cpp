/* fix mpcbox, keyword `timing yes`: where a run's time goes, reported at the end of each run.
 *
 * Each exchange starts at a barrier, so a rank that finished its MD steps early waits there and
 * that wait counts as MD, not as the exchange. The parts are summed per rank and the slowest
 * rank's sum is reported; MD is the run's loop time minus the slowest rank's exchanges. The
 * barrier costs a few microseconds per exchange, so it is only there when timing is asked for.
 * `begin` is the time of beginning the fluid's step in pre_force (`overlap yes`), part of md;
 * `count`, the part of pack before the copies (the Lees-Edwards check, the group atoms counted). */

#include "fix_mpcbox.h"

#include "comm.h"
#include "update.h"
#include "utils.h"

#include <cstdio>
#include <string>

using namespace LAMMPS_NS;

void FixMpcbox::timing_start_exchange()
{
  if (!timing) return;
  MPI_Barrier(world);
  times.mark = MPI_Wtime();
  times.exchanges++;
}

void FixMpcbox::timing_lap(double &part)
{
  if (!timing) return;
  const double now = MPI_Wtime();
  part += now - times.mark;
  times.mark = now;
}

void FixMpcbox::timing_start_run()
{
  if (!timing) return;
  times = ExchangeTimes();
  MPI_Barrier(world);
  times.run_start = MPI_Wtime();
}

void FixMpcbox::post_run()
{
  if (!timing) return;
  MPI_Barrier(world);
  const double loop = MPI_Wtime() - times.run_start;
  const double mine[7] = {times.pack,    times.step,
                          times.unpack,  times.observe,
                          times.pack + times.step + times.unpack + times.observe,
                          times.begin, times.count};
  double slowest[7] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  MPI_Allreduce(mine, slowest, 7, MPI_DOUBLE, MPI_MAX, world);
  if (comm->me != 0 || times.exchanges == 0) return;
  const double per = 1e3 / static_cast<double>(times.exchanges);
  char line[512];
  snprintf(line, sizeof(line),
           "fix mpcbox timing: %ld exchanges in %.6g s on %d ranks; per exchange (ms, slowest "
           "rank): md %.6g pack %.6g mpcbox_step %.6g unpack %.6g observe %.6g exchange %.6g "
           "begin %.6g count %.6g\n",
           times.exchanges, loop, comm->nprocs, (loop - slowest[4]) * per, slowest[0] * per,
           slowest[1] * per, slowest[2] * per, slowest[3] * per, slowest[4] * per,
           slowest[5] * per, slowest[6] * per);
  utils::logmesg(lmp, std::string(line));
}
