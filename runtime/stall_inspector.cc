#include "runtime/stall_inspector.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/rank_list.h"

namespace kolo {
namespace {

SteadyClock::duration seconds(double s) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

double StallInspector::threshold_s() const {
  return shutdown_s_ > 0 ? std::min(warning_s_, shutdown_s_) : warning_s_;
}

StallInspector::Clock::time_point StallInspector::next_check(const Negotiator& negotiator) const {
  if (!negotiator.has_local_pending()) return Clock::time_point::max();
  const double period = threshold_s();
  const auto first = negotiator.oldest_local() + seconds(period);
  // Then every half period, so rank 0 sees the stall soon after it begins.
  const auto again = last_check_round_ + seconds(period / 2);
  return std::max(first, again);
}

void StallInspector::begin_check_round(Negotiator* negotiator, Clock::time_point now) {
  negotiator->expose_older_than(now - seconds(threshold_s() / 2));
  last_check_round_ = now;
}

std::string StallInspector::inspect(Negotiator* negotiator, Clock::time_point now) {
  // A name is looked at once it is older than the warning or, when that
  // is sooner, the shutdown limit (then every one found is fatal).
  std::vector<StalledName> stalled = negotiator->stalled(now, threshold_s());
  std::string report;
  bool fatal = false;
  for (const auto& s : stalled) {
    if (s.missing.empty()) continue;
    auto last = reported_.find(s.name);
    const bool shutdown = shutdown_s_ > 0 && s.age_s >= shutdown_s_;
    fatal = fatal || shutdown;
    if (!shutdown && last != reported_.end() && std::chrono::duration<double>(now - last->second).count() < warning_s_) {
      continue;
    }
    reported_[s.name] = now;
    char age[32];
    std::snprintf(age, sizeof(age), "%.1f", s.age_s);
    report += (report.empty() ? "" : "; ") + std::string(op_kind_name(s.kind)) + " '" + s.name +
              "' submitted on rank(s) " + rank_list(s.present) + " but not on rank(s) " + rank_list(s.missing) +
              " for " + age + " s";
  }
  for (auto it = reported_.begin(); it != reported_.end();) {  // forget finished names
    bool still = std::any_of(stalled.begin(), stalled.end(), [&](const StalledName& s) { return s.name == it->first; });
    it = still ? std::next(it) : reported_.erase(it);
  }
  if (report.empty()) return report;
  report = "stalled: " + report;
  if (fatal) {
    OpRequest abort_request;
    abort_request.kind = OpKind::kStallAbort;
    std::ostringstream limit;
    limit << shutdown_s_;
    abort_request.name = report + " (longer than KOLO_STALL_SHUTDOWN_S=" + limit.str() + " s)";
    negotiator->add_internal(abort_request);
  }
  return report;
}

}  // namespace kolo
