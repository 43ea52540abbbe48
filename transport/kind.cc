#include "transport/kind.h"

#include <algorithm>
#include <utility>

namespace kolo {
namespace {

struct Registered {
  int preference;
  std::unique_ptr<TransportKind> kind;
};

// Built on first use: registrations run during static initialisation, in
// an order across files that nothing fixes.
std::vector<Registered>& registered() {
  static auto* all = new std::vector<Registered>();
  return *all;
}

std::vector<const TransportKind*>& ordered() {
  static auto* kinds = new std::vector<const TransportKind*>();
  return *kinds;
}

}  // namespace

TransportRegistration::TransportRegistration(int preference, std::unique_ptr<TransportKind> kind) {
  auto& all = registered();
  all.push_back({preference, std::move(kind)});
  std::stable_sort(all.begin(), all.end(),
                   [](const Registered& a, const Registered& b) { return a.preference < b.preference; });
  ordered().clear();
  for (const Registered& r : all) ordered().push_back(r.kind.get());
}

const std::vector<const TransportKind*>& transport_kinds() { return ordered(); }

const TransportKind* find_transport_kind(const std::string& name) {
  for (const TransportKind* kind : transport_kinds()) {
    if (name == kind->name()) return kind;
  }
  return nullptr;
}

}  // namespace kolo
