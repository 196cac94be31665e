/* fix mpcbox: the threads of the per-rank exchange loops (packing the group atoms, writing the
 * velocities back). Their own threads, not OpenMP's: LAMMPS makes OpenMP one thread where
 * OMP_NUM_THREADS is unset, and OpenMP's threads spin after each loop by default, on the cores
 * the fluid's host threads need during the MPC step. These wait on a condition variable. */

#ifndef MPCBOX_EXCHANGE_THREADS_H
#define MPCBOX_EXCHANGE_THREADS_H

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
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

  /* body(i) for every i in [0, items), each once, on any of the threads (the caller's too);
   * returns when all are done. */
  void run(int items, const std::function<void(int)> &body);

  /* `threads auto`: this rank's share of its host's cores (the cores it may run on, at most the
   * host's divided among `ranks_on_host`), 1 to 16: past 16 the loops are bound by memory. */
  static int share_of_cores(int ranks_on_host);

 private:
  // One waiting thread. Each has its own lock and signal: woken through one shared lock, the
  // threads would take it one after another, each from its sleep, and the last would start
  // long after the first.
  struct Worker {
    std::thread thread;
    std::mutex lock;
    std::condition_variable signal;
    unsigned long round = 0;    // loops this worker was asked to join
    bool closing = false;
  };
  void work(Worker &me);
  void take_items();

  std::vector<std::unique_ptr<Worker>> workers;
  const std::function<void(int)> *body = nullptr;
  int items = 0;
  int run_length = 1;
  std::atomic<int> next{0};       // the first item not yet taken: threads take runs of items
  std::atomic<int> pending{0};    // workers still in the current loop
};

}    // namespace LAMMPS_NS

#endif
