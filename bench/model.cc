#include "bench/model.h"

#include <algorithm>

namespace kolo::bench {

bool parse_collective(const std::string& name, Collective* out) {
  if (name == "allreduce") *out = Collective::kAllreduce;
  else if (name == "allgather") *out = Collective::kAllgather;
  else if (name == "broadcast") *out = Collective::kBroadcast;
  else if (name == "reduce_scatter") *out = Collective::kReduceScatter;
  else if (name == "reduce") *out = Collective::kReduce;
  else if (name == "gather") *out = Collective::kGather;
  else if (name == "scatter") *out = Collective::kScatter;
  else if (name == "allgatherv") *out = Collective::kAllgatherv;
  else if (name == "reduce_scatterv") *out = Collective::kReduceScatterv;
  else if (name == "alltoall") *out = Collective::kAlltoall;
  else if (name == "alltoallv") *out = Collective::kAlltoallv;
  else return false;
  return true;
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kReduce: return "reduce";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kAllgatherv: return "allgatherv";
    case Collective::kReduceScatterv: return "reduce_scatterv";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kAlltoallv: return "alltoallv";
  }
  return "?";
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) / n;
    // nccl-tests' conventions: gather's and scatter's size is root's whole
    // buffer, alltoall's one rank's send buffer.
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kAllgatherv:
    case Collective::kReduceScatterv:
    case Collective::kGather:
    case Collective::kScatter:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: return 1.0 * (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1.0;
  }
  return 1.0;
}

double bytes_on_links(Collective c, int n, double bytes) {
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) * bytes;
    // allgather's size is its output; reduce-scatter's its input: every
    // rank receives (N-1)/N of it.
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kAllgatherv:
    case Collective::kReduceScatterv: return 1.0 * (n - 1) * bytes;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1.0 * (n - 1) * bytes;  // a chain: N-1 links carry the buffer
    // Relayed around the ring: the block k hops from root crosses k links.
    case Collective::kGather:
    case Collective::kScatter: return bytes / n * n * (n - 1) / 2.0;
    case Collective::kAlltoall:
    case Collective::kAlltoallv: return 1.0 * (n - 1) * bytes;  // each rank sends (N-1)/N of its buffer
  }
  return bytes;
}

double algbw_gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double RingModel::allreduce_seconds(double bytes, int n) const {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * hop_latency_s + 2.0 * (n - 1) / n * bytes / link_bytes_per_s;
}

RingModel RingModel::fit(int n, double small_bytes, double small_s, double large_bytes, double large_s) {
  RingModel m;
  const double hops = 2.0 * (n - 1);
  const double share = 2.0 * (n - 1) / n;
  // Two equations, two unknowns: t = hops*alpha + share*bytes/beta.
  const double per_byte = (large_s - small_s) / (share * (large_bytes - small_bytes));
  m.link_bytes_per_s = per_byte > 0 ? 1.0 / per_byte : 1e30;
  m.hop_latency_s = std::max(0.0, (small_s - share * small_bytes * per_byte) / hops);
  return m;
}

double overlapped_step_seconds(double forward_s, double backward_s, const std::vector<double>& ready_s,
                               const std::vector<double>& comm_s) {
  double comm_free = 0;  // when the communication channel is next free
  for (size_t b = 0; b < ready_s.size() && b < comm_s.size(); ++b) {
    comm_free = std::max(comm_free, ready_s[b]) + comm_s[b];
  }
  return forward_s + std::max(backward_s, comm_free);
}

}  // namespace kolo::bench
