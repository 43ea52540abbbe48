#include "bench/report.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench/values.h"

namespace kolo::bench {
namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.9g", v);
  return b;
}

}  // namespace

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

void print_sweep(const SweepOptions& o, int n, const std::string& transport, const std::vector<SweepRow>& rows) {
  std::printf("# kolo_bench %s %s %s, %d ranks over %s; time = max over ranks of each rank's median; "
              "busbw = algbw x %.4g\n",
              collective_name(o.collective), kDtypeNames[o.dtype], kOpNames[o.op], n, transport.c_str(),
              bus_factor(o.collective, n));
  const bool algorithms = !rows.empty() && !rows[0].algorithm.empty();
  std::printf("%12s %12s %11s %8s %11s %11s%s%s%s\n", "size(B)", "count", "time(us)", "spread", "algbw(GB/s)",
              "busbw(GB/s)", o.link_gbps > 0 ? "   ideal%" : "", o.check ? "  check" : "",
              algorithms ? "  algorithm" : "");
  for (const auto& r : rows) {
    std::printf("%12zu %12zu %11.2f %7.0f%% %11.3f %11.3f", r.bytes, r.count, r.time_s * 1e6, r.spread * 100, r.algbw,
                r.busbw);
    if (o.link_gbps > 0) std::printf(" %8.1f%%", r.ideal_pct);
    if (o.check) std::printf("  %s", r.ok ? "OK" : "FAIL");
    if (algorithms) std::printf("  %s", r.algorithm.c_str());
    std::printf("\n");
  }
  std::fflush(stdout);
}

std::string sweep_json(const SweepOptions& o, int n, const std::string& transport, const std::vector<SweepRow>& rows) {
  std::ostringstream j;
  j << "{\"mode\": \"sweep\", \"collective\": \"" << collective_name(o.collective) << "\", \"ranks\": " << n
    << ", \"transport\": \"" << transport << "\""
    << ", \"dtype\": \"" << kDtypeNames[o.dtype] << "\", \"op\": \"" << kOpNames[o.op]
    << "\", \"bus_factor\": " << num(bus_factor(o.collective, n)) << ", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    j << (i ? ", " : "") << "{\"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"time_us\": " << num(r.time_s * 1e6) << ", \"spread\": " << num(r.spread)
      << ", \"algbw_gbps\": " << num(r.algbw) << ", \"busbw_gbps\": " << num(r.busbw);
    if (o.link_gbps > 0) j << ", \"ideal_pct\": " << num(r.ideal_pct);
    if (r.checked) j << ", \"check\": " << (r.ok ? "true" : "false");
    if (!r.algorithm.empty()) j << ", \"algorithm\": \"" << r.algorithm << "\"";
    j << "}";
  }
  j << "]}\n";
  return j.str();
}

bool plot_sweep(const SweepOptions& o, int n, const std::vector<SweepRow>& rows, const std::string& png) {
  const std::string data = png + ".dat", script = png + ".gp";
  std::ostringstream d;
  for (const auto& r : rows) d << r.bytes << " " << r.busbw << "\n";
  std::ostringstream g;
  g << "set terminal pngcairo size 900,560\n"
    << "set output '" << png << "'\n"
    << "set title 'kolo " << collective_name(o.collective) << ", " << n << " ranks, " << kDtypeNames[o.dtype]
    << "'\nset xlabel 'message size (bytes)'\nset ylabel 'bus bandwidth (GB/s)'\n"
    << "set logscale x 2\nset format x '2^{%L}'\nset grid\nset key off\n"
    << "plot '" << data << "' using 1:2 with linespoints lw 2 pt 7\n";
  if (!write_file(data, d.str()) || !write_file(script, g.str())) return false;
  const std::string cmd = "gnuplot '" + script + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "kolo_bench: gnuplot failed or is missing (tools/setup.sh installs it)\n");
    return false;
  }
  std::remove(data.c_str());
  std::remove(script.c_str());
  return true;
}

void print_scaling(const ScalingOptions& o, int n, const std::vector<ScalingResult>& results) {
  std::printf("# kolo_bench scaling, %d ranks; compute emulated (scale %.3g), buckets of %.0f MiB; "
              "efficiency = T(1) / T(N)\n",
              n, o.compute_scale, o.bucket_mb);
  std::printf("%-14s %10s %8s %8s %10s %10s %10s\n", "model", "params", "tensors", "buckets", "T(1) ms",
              "T(N) ms", "efficiency");
  for (const auto& r : results) {
    std::printf("%-14s %9.1fM %8zu %8zu %10.1f %10.1f %9.1f%%\n", r.model.c_str(), r.parameters / 1e6, r.gradients,
                r.buckets, r.t1_s * 1e3, r.tn_s * 1e3, r.efficiency * 100);
  }
  if (o.predict_ranks > 0 && !results.empty() && results[0].predicted_ranks > 0) {
    const RingModel& m = results[0].fitted;
    std::printf("# PREDICTION (not measured) for %d ranks on as many hosts, simulated over links with this run's "
                "ring's hop latency %.1f us and bandwidth %.3f GB/s\n",
                o.predict_ranks, m.hop_latency_s * 1e6, m.link_bytes_per_s / 1e9);
    for (const auto& r : results) {
      std::printf("%-14s predicted T(%d) %.1f ms, efficiency %.1f%%\n", r.model.c_str(), r.predicted_ranks,
                  r.predicted_tn_s * 1e3, r.predicted_efficiency * 100);
    }
  }
  std::fflush(stdout);
}

std::string scaling_json(const ScalingOptions& o, int n, const std::vector<ScalingResult>& results) {
  std::ostringstream j;
  j << "{\"mode\": \"scaling\", \"ranks\": " << n << ", \"compute_scale\": " << num(o.compute_scale)
    << ", \"bucket_mb\": " << num(o.bucket_mb) << ", \"models\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    j << (i ? ", " : "") << "{\"model\": \"" << r.model << "\", \"parameters\": " << r.parameters
      << ", \"tensors\": " << r.gradients << ", \"buckets\": " << r.buckets << ", \"t1_ms\": " << num(r.t1_s * 1e3)
      << ", \"tn_ms\": " << num(r.tn_s * 1e3) << ", \"efficiency\": " << num(r.efficiency);
    if (r.predicted_ranks > 0) {
      j << ", \"prediction\": {\"ranks\": " << r.predicted_ranks << ", \"tn_ms\": " << num(r.predicted_tn_s * 1e3)
        << ", \"efficiency\": " << num(r.predicted_efficiency)
        << ", \"hop_latency_us\": " << num(r.fitted.hop_latency_s * 1e6)
        << ", \"link_gbps\": " << num(r.fitted.link_bytes_per_s / 1e9) << "}";
    }
    j << "}";
  }
  j << "]}\n";
  return j.str();
}

}  // namespace kolo::bench
