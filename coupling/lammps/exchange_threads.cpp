/* fix mpcbox: the exchange loops' threads (exchange_threads.h). */

#include "exchange_threads.h"

#include <algorithm>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

using namespace LAMMPS_NS;

ExchangeThreads::ExchangeThreads(int count)
{
  for (int k = 1; k < count; k++) workers.emplace_back(&ExchangeThreads::work, this, k);
}

ExchangeThreads::~ExchangeThreads()
{
  {
    std::lock_guard<std::mutex> hold(lock);
    closing = true;
  }
  begun.notify_all();
  for (std::thread &t : workers) t.join();
}

void ExchangeThreads::run_part(int k)
{
  const long n = count();
  const int lo = static_cast<int>(items * k / n), hi = static_cast<int>(items * (k + 1) / n);
  for (int i = lo; i < hi; i++) (*body)(i);
}

void ExchangeThreads::run(int items_, const std::function<void(int)> &body_)
{
  if (workers.empty() || items_ < 2) {
    for (int i = 0; i < items_; i++) body_(i);
    return;
  }
  {
    std::lock_guard<std::mutex> hold(lock);
    body = &body_;
    items = items_;
    pending = static_cast<int>(workers.size());
    round++;
  }
  begun.notify_all();
  run_part(0);
  std::unique_lock<std::mutex> hold(lock);
  finished.wait(hold, [this] { return pending == 0; });
  body = nullptr;
}

void ExchangeThreads::work(int k)
{
  unsigned long seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> hold(lock);
      begun.wait(hold, [&] { return closing || round != seen; });
      if (closing) return;
      seen = round;
    }
    // body and items stay as they are until every worker has finished this round
    run_part(k);
    bool last = false;
    {
      std::lock_guard<std::mutex> hold(lock);
      last = --pending == 0;
    }
    if (last) finished.notify_one();
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
