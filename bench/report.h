// What kolo_bench prints and writes: tables, JSON, a busbw plot.
#pragma once

#include <string>
#include <vector>

#include "bench/scaling.h"
#include "bench/sweep.h"

namespace kolo::bench {

// transport: what kolo_comm_get_transport says.
void print_sweep(const SweepOptions& o, int ranks, const std::string& transport, const std::vector<SweepRow>& rows);
std::string sweep_json(const SweepOptions& o, int ranks, const std::string& transport,
                       const std::vector<SweepRow>& rows);
// Draws busbw against size with gnuplot; false (and a message) if it cannot.
bool plot_sweep(const SweepOptions& o, int ranks, const std::vector<SweepRow>& rows, const std::string& png);

void print_scaling(const ScalingOptions& o, int ranks, const std::vector<ScalingResult>& results);
std::string scaling_json(const ScalingOptions& o, int ranks, const std::vector<ScalingResult>& results);

bool write_file(const std::string& path, const std::string& text);

}  // namespace kolo::bench
