#include "runtime/lingering_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/rank_list.h"
#include "runtime/store_client.h"
#include "runtime/store_server.h"

namespace kolo {
namespace {

// A server still serving, on the thread that waits for its clients.
struct Lingering {
  std::thread waiter;
  std::shared_ptr<std::atomic<bool>> done;
  pid_t pid;  // the process that started the thread (a forked child has none)
};

// Never destroyed: threads use them while the process exits.
struct Lingerers {
  std::mutex mu;
  std::vector<Lingering> all;
  std::vector<std::thread> abandoned;  // a forked child's copies of its parent's threads
  std::atomic<bool> exiting{false};
};

Lingerers& lingerers() {
  static Lingerers* l = new Lingerers();
  return *l;
}

void join_or_abandon(Lingering& l) {
  if (l.pid == getpid()) {
    l.waiter.join();
  } else {
    std::lock_guard<std::mutex> lock(lingerers().mu);
    lingerers().abandoned.push_back(std::move(l.waiter));  // the parent's thread, not this process's to join
  }
}

// The process's exit waits for every server still serving (each until its
// deadline at most).
struct WaitAtExit {
  ~WaitAtExit() {
    lingerers().exiting.store(true);
    std::vector<Lingering> all;
    {
      std::lock_guard<std::mutex> lock(lingerers().mu);
      all.swap(lingerers().all);
    }
    for (Lingering& l : all) join_or_abandon(l);
  }
};

// The ranks the server still serves. Once the process exits, the ranks of
// its own other communicators no longer count: they will never close.
std::vector<int> ranks_served(const StoreServer& server) {
  std::vector<int> ranks;
  for (const StoreServer::Client& c : server.clients()) {
    if (!lingerers().exiting.load() || !is_this_process_store_client(c.endpoint)) ranks.push_back(c.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

void serve(const StoreServer& server, Deadline deadline) {
  // Quietly at first: the other ranks usually close their communicators
  // moments after this one. One still open after a few seconds is worth a
  // word, since this process's exit waits for it.
  const Deadline quiet = Deadline::after(std::chrono::seconds(5));
  bool told = false;
  for (std::vector<int> ranks; !(ranks = ranks_served(server)).empty() && !deadline.expired();) {
    if (!told && quiet.expired()) {
      const bool one = ranks.size() == 1;
      KOLO_WARN("the rendezvous store rank 0 serves stays up for "
                << ranks_named(ranks, 16)
                << (one ? ", whose communicator is still open: until it closes it or exits"
                        : ", whose communicators are still open: until they close them or exit")
                << ", for at most " << (deadline.remaining_ms() + 999) / 1000
                << " s more (KOLO_TIMEOUT_S); this process does not exit before then");
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, deadline.remaining_ms())));
  }
}

}  // namespace

void serve_until_clients_leave(std::unique_ptr<StoreServer> server, Deadline deadline) {
  server->stop_accepting();
  if (server->clients().empty()) return;
  static WaitAtExit wait_at_exit;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread waiter([s = server.release(), deadline, done] {
    serve(*s, deadline);
    delete s;
    done->store(true);
  });
  // Join the threads of servers already gone, and keep this one's.
  std::vector<Lingering> gone;
  {
    std::lock_guard<std::mutex> lock(lingerers().mu);
    auto& all = lingerers().all;
    auto first_gone = std::stable_partition(all.begin(), all.end(), [](const Lingering& l) { return !l.done->load(); });
    std::move(first_gone, all.end(), std::back_inserter(gone));
    all.erase(first_gone, all.end());
    all.push_back(Lingering{std::move(waiter), done, getpid()});
  }
  for (Lingering& l : gone) join_or_abandon(l);
}

}  // namespace kolo
