/* fix mpcbox: the exchange loops' threads (exchange_threads.h). */

#include "exchange_threads.h"

#include <algorithm>
#include <system_error>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

using namespace LAMMPS_NS;


ExchangeThreads::ExchangeThreads(int count)
{
  for (int k = 1; k < count; k++) {
    std::unique_ptr<Worker> w(new Worker());
    try {
      w->thread = std::thread(&ExchangeThreads::work, this, std::ref(*w));
    } catch (const std::system_error &) {
      break;    // the system gives no more threads: the loops run on those made
    }
    workers.push_back(std::move(w));
  }
}

ExchangeThreads::~ExchangeThreads()
{
  for (auto &w : workers) {
    {
      std::lock_guard<std::mutex> hold(w->lock);
      w->closing = true;
    }
    w->signal.notify_one();
  }
  for (auto &w : workers) w->thread.join();
}

void ExchangeThreads::take_items()
{
  for (;;) {
    const int first = next.fetch_add(run_length, std::memory_order_relaxed);
    if (first >= items) return;
    const int last = std::min(items, first + run_length);
    for (int i = first; i < last; i++) (*body)(i);
  }
}

void ExchangeThreads::run(int items_, const std::function<void(int)> &body_)
{
  if (workers.empty() || items_ < 2) {
    for (int i = 0; i < items_; i++) body_(i);
    return;
  }
  body = &body_;
  items = items_;
  // items a thread takes at a time: about four runs per thread, at most 16 items, so that a
  // thread that wakes late takes fewer and none waits for it
  run_length = std::max(1, std::min(16, items / (4 * count())));
  next.store(0, std::memory_order_relaxed);
  pending.store(static_cast<int>(workers.size()), std::memory_order_relaxed);
  // each worker's lock orders the writes above before its start
  for (auto &w : workers) {
    {
      std::lock_guard<std::mutex> hold(w->lock);
      w->round++;
    }
    w->signal.notify_one();
  }
  take_items();
  // the items are all taken; the workers finish theirs (and late ones find none)
  while (pending.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  body = nullptr;
}

void ExchangeThreads::work(Worker &me)
{
  unsigned long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> hold(me.lock);
      me.signal.wait(hold, [&] { return me.closing || me.round != seen; });
      if (me.closing) return;
      seen = me.round;
    }
    take_items();
    // release: this worker's items are written before the caller sees it done
    pending.fetch_sub(1, std::memory_order_release);
  }
}

int ExchangeThreads::share_of_cores(int ranks_on_host)
{
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  long usable = online;
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) usable = CPU_COUNT(&set);
#endif
  const long share = std::min(usable, online / std::max(1, ranks_on_host));
  return static_cast<int>(std::max(1L, std::min(16L, share)));
}
