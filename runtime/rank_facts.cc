#include "runtime/rank_facts.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace kolo {
namespace {

std::string namespace_id(const char* which) {
  struct stat st {};
  if (::stat((std::string("/proc/self/ns/") + which).c_str(), &st) != 0) return "?";
  return std::to_string(st.st_ino);
}

}  // namespace

std::string encode_rank_facts(const RankFacts& f) {
  return f.host + "|" + (f.rdma ? "rdma" : "-") + "|" + std::to_string(f.shm_free);
}

Status decode_rank_facts(const std::string& text, RankFacts* f) {
  const size_t b2 = text.rfind('|');
  const size_t b1 = b2 == std::string::npos || b2 == 0 ? std::string::npos : text.rfind('|', b2 - 1);
  if (b1 == std::string::npos) return internal_error("malformed rank record '" + text + "' in the store");
  f->host = text.substr(0, b1);
  f->rdma = text.substr(b1 + 1, b2 - b1 - 1) == "rdma";
  f->shm_free = std::strtoull(text.c_str() + b2 + 1, nullptr, 10);
  return Status::ok();
}

RankFacts local_rank_facts(const std::string& host_name, bool rdma) {
  RankFacts f;
  std::string name = host_name;
  if (name.empty()) {
    char buf[256] = {0};
    ::gethostname(buf, sizeof(buf) - 1);
    name = buf;
  }
  // The kernel's boot id last, after '/': ranks of one kernel share its
  // cores (Communicator::choose_polling) whatever their namespaces.
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  boot >> boot_id;
  f.host = name + ":net" + namespace_id("net") + ":ipc" + namespace_id("ipc") + ":pid" + namespace_id("pid") + "/" +
           boot_id;
  f.rdma = rdma;
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) == 0 && ::access("/dev/shm", W_OK) == 0) {
    f.shm_free = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  return f;
}

}  // namespace kolo
