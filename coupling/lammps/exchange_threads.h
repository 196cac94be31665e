/* fix mpcbox: the threads of the per-rank exchange loops (packing the group atoms, writing the
 * velocities back). Their own threads, not OpenMP's: LAMMPS makes OpenMP one thread where
 * OMP_NUM_THREADS is unset, and OpenMP's threads spin after each loop by default, on the cores
 * the fluid's host threads need during the MPC step. These wait on a condition variable. */

#ifndef MPCBOX_EXCHANGE_THREADS_H
#define MPCBOX_EXCHANGE_THREADS_H

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace LAMMPS_NS {

class ExchangeThreads {
 public:
  /* `count` threads in all: the caller's and count - 1 that wait between loops. */
  explicit ExchangeThreads(int count);
  ~ExchangeThreads();
  ExchangeThreads(const ExchangeThreads &) = delete;
  ExchangeThreads &operator=(const ExchangeThreads &) = delete;

  int count() const { return static_cast<int>(workers.size()) + 1; }

  /* body(i) for every i in [0, items): thread k takes the k-th of count() equal runs of i (the
   * caller the first); returns when all are done. */
  void run(int items, const std::function<void(int)> &body);

  /* `threads auto`: this rank's share of its host's cores (the cores it may run on, at most the
   * host's divided among `ranks_on_host`), 1 to 16: past 16 the loops are bound by memory. */
  static int share_of_cores(int ranks_on_host);

 private:
  void work(int k);
  void run_part(int k);

  std::vector<std::thread> workers;
  std::mutex lock;
  std::condition_variable begun, finished;
  const std::function<void(int)> *body = nullptr;
  int items = 0;
  unsigned long round = 0;    // loops begun so far: a worker runs each round once
  int pending = 0;            // workers still in the current round
  bool closing = false;
};

}    // namespace LAMMPS_NS

#endif
