#include "runtime/transport_registry.h"

#include <algorithm>
#include <map>

#include "transport/handshake.h"
#include "transport/shm/shm_arena.h"
#include "transport/shm/shm_transport.h"

namespace kolo {
namespace {

bool shm_reaches(const RankFacts& a, const RankFacts& b, int ranks_on_host, std::string* why_not) {
  if (a.host != b.host) {
    *why_not = "another machine";
    return false;
  }
  // Room for a ring each way between every two ranks of the machine (a
  // communicator connects fewer pairs, lazily; the rest is for the engine's
  // and splits' communicators), and the allreduce arenas of the world and
  // the engine's communicator.
  const uint64_t rings = static_cast<uint64_t>(ranks_on_host) * (ranks_on_host - 1) * ShmRingShape{}.segment_bytes();
  const uint64_t need = rings + 2 * static_cast<uint64_t>(ranks_on_host) * ShmArenaOptions{}.slot_bytes;
  const uint64_t have = std::min(a.shm_free, b.shm_free);
  if (have < need) {
    *why_not = "/dev/shm has " + std::to_string(have >> 20) + " MiB free and " + std::to_string(ranks_on_host) +
               " ranks here need " + std::to_string((need + (1 << 20) - 1) >> 20) +
               " MiB (in a container, raise it: docker run --shm-size=1g)";
    return false;
  }
  return true;
}

bool rdma_reaches(const RankFacts& a, const RankFacts& b, int, std::string* why_not) {
  if (a.rdma && b.rdma) return true;
  *why_not = a.rdma || b.rdma ? "RDMA on one end only" : "no RDMA device";
  return false;
}

bool tcp_reaches(const RankFacts&, const RankFacts&, int, std::string*) { return true; }

Status open_shm(TransportSetup* s, std::unique_ptr<DirectTransport>* out) {
  ShmOptions options;
  options.store_prefix = s->store_prefix + "shm/";
  options.job_id = job_id_from_name(s->job_name + s->store_prefix);
  std::unique_ptr<ShmTransport> t;
  KOLO_RETURN_IF_ERROR(ShmTransport::create(s->store, s->rank, s->size, options, &t));
  *out = std::move(t);
  return Status::ok();
}

Status open_any_rdma(TransportSetup* s, std::unique_ptr<DirectTransport>* out) {
  if (s->opened_rdma) {
    *out = std::move(s->opened_rdma);
    return Status::ok();
  }
  std::unique_ptr<IbTransport> t;
  Status status = open_rdma(*s, &t);
  if (!status.is_ok()) return status.with_context("the RDMA transport");
  *out = std::move(t);
  return Status::ok();
}

Status open_tcp(TransportSetup* s, std::unique_ptr<DirectTransport>* out) {
  std::unique_ptr<TcpTransport> t;
  KOLO_RETURN_IF_ERROR(TcpTransport::create(s->store, s->rank, s->size, s->tcp, &t));
  *out = std::move(t);
  return Status::ok();
}

// "1, 3-5, 7".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace

Status open_rdma(const TransportSetup& s, std::unique_ptr<IbTransport>* out) {
  IbOptions options;
  options.store_prefix = s.store_prefix + "ib/";
  options.job_id = job_id_from_name(s.job_name);
  options.settings = s.ib;
  options.link = s.tcp;
  return IbTransport::create(s.store, s.rank, s.size, options, out);
}

const std::vector<TransportKind>& transport_registry() {
  static const std::vector<TransportKind> kinds = {
      {"shm", shm_reaches, open_shm},
      {"ib", rdma_reaches, open_any_rdma},
      {"tcp", tcp_reaches, open_tcp},
  };
  return kinds;
}

Status choose_routes(const std::vector<RankFacts>& facts, int rank, const std::string& forced, Routes* out) {
  const auto& kinds = transport_registry();
  const int n = static_cast<int>(facts.size());
  std::map<std::string, int> per_host;
  for (const RankFacts& f : facts) ++per_host[f.host];
  out->kind.assign(n, -1);
  std::map<std::pair<int, std::string>, std::vector<int>> groups;  // (kind, why) -> ranks
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    std::string why;  // why the earlier kinds could not
    for (int k = 0; k < static_cast<int>(kinds.size()); ++k) {
      const bool allowed = forced == "auto" || forced == kinds[k].name;
      std::string why_not;
      if (!allowed) continue;
      if (kinds[k].reaches(facts[rank], facts[peer], per_host[facts[rank].host], &why_not)) {
        out->kind[peer] = k;
        break;
      }
      if (forced != "auto") {
        return invalid_usage("KOLO_TRANSPORT=" + forced + " cannot reach rank " + std::to_string(peer) + ": " +
                             why_not);
      }
      if (why.find(why_not) == std::string::npos) why += (why.empty() ? "" : "; ") + why_not;
    }
    if (out->kind[peer] < 0) return invalid_usage("no transport reaches rank " + std::to_string(peer) + ": " + why);
    if (forced != "auto") why = "KOLO_TRANSPORT=" + forced;
    else if (why.empty()) why = kinds[out->kind[peer]].name == std::string("shm") ? "same machine" : "preferred";
    groups[{out->kind[peer], why}].push_back(peer);
  }
  out->summary.clear();
  for (const auto& g : groups) {
    out->summary += (out->summary.empty() ? "" : "; ") + std::string(kinds[g.first.first].name) + " to rank" +
                    (g.second.size() > 1 ? "s " : " ") + rank_list(g.second) + " (" + g.first.second + ")";
  }
  return Status::ok();
}

}  // namespace kolo
