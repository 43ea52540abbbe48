#include "runtime/rank_facts.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>

namespace kolo {
namespace {

std::string namespace_id(const char* which) {
  struct stat st {};
  if (::stat((std::string("/proc/self/ns/") + which).c_str(), &st) != 0) return "?";
  return std::to_string(st.st_ino);
}

Status malformed(const std::string& text, const char* why) {
  return internal_error("malformed rank record '" + text.substr(0, 200) + "' in the store (" + why + ")");
}

}  // namespace

// "<length of host>:<host>" then ";<kind>=<offer>" per kind: the host is
// free text (KOLO_HOSTNAME), the kinds' names and offers are the kinds'
// own and hold no ';'. The standby store's address comes as one more
// entry, under a name no kind has (kinds' names hold no '.').
constexpr char kStandbyEntry[] = "store.standby";

std::string encode_rank_facts(const RankFacts& f) {
  std::string text = std::to_string(f.host.size()) + ":" + f.host;
  for (const auto& [kind, offer] : f.offers) text += ";" + kind + "=" + offer;
  if (!f.standby_store.empty()) text += std::string(";") + kStandbyEntry + "=" + f.standby_store;
  return text;
}

Status decode_rank_facts(const std::string& text, RankFacts* f) {
  size_t i = 0;
  uint64_t length = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && i < 9) {
    length = length * 10 + static_cast<uint64_t>(text[i++] - '0');
  }
  if (i == 0 || i >= text.size() || text[i] != ':') return malformed(text, "no host length");
  ++i;
  if (length > text.size() - i) return malformed(text, "host longer than the record");
  f->host = text.substr(i, length);
  f->offers.clear();
  f->standby_store.clear();
  i += length;
  while (i < text.size()) {
    if (text[i] != ';') return malformed(text, "no ';' before a transport");
    const size_t end = std::min(text.find(';', i + 1), text.size());
    const size_t eq = text.find('=', i + 1);
    if (eq == std::string::npos || eq >= end || eq == i + 1) return malformed(text, "a transport without a name");
    const std::string kind = text.substr(i + 1, eq - i - 1);
    if (!f->offers.emplace(kind, text.substr(eq + 1, end - eq - 1)).second) {
      return malformed(text, "a transport twice");
    }
    i = end;
  }
  auto standby = f->offers.find(kStandbyEntry);
  if (standby != f->offers.end()) {
    f->standby_store = standby->second;
    f->offers.erase(standby);
  }
  return Status::ok();
}

std::string local_host(const std::string& host_name) {
  std::string name = host_name;
  if (name.empty()) {
    char buf[256] = {0};
    ::gethostname(buf, sizeof(buf) - 1);
    name = buf;
  }
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  boot >> boot_id;
  return name + ":net" + namespace_id("net") + ":ipc" + namespace_id("ipc") + ":pid" + namespace_id("pid") + "/" +
         boot_id;
}

}  // namespace kolo
