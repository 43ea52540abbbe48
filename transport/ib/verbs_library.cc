#include "transport/ib/verbs_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/log.h"

namespace kolo {

namespace {

constexpr const char* kDefaultFile = "libibverbs.so.1";

// Resolves `name` at `version` into *fn; false (with *why) when absent.
template <typename Fn>
bool resolve(void* handle, const std::string& file, const char* name, const char* version, Fn* fn,
             std::string* why) {
  void* p = ::dlvsym(handle, name, version);
  if (!p) {
    *why = file + " has no " + name + "@" + version + " (too old a libibverbs?)";
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

}  // namespace

VerbsLibrary VerbsLibrary::load(const std::string& file) {
  VerbsLibrary lib;
  lib.file_ = file;
  ::dlerror();  // clear a stale message
  // Never closed: the application (or another of its libraries) may use
  // the same library, and kolo's contexts live to the process's end.
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* error = ::dlerror();
    lib.status_ = unsupported(file + " could not be loaded (" + (error ? error : "unknown error") +
                              "): install rdma-core's libibverbs1 (Debian, Ubuntu: apt-get install libibverbs1 "
                              "ibverbs-providers) to use RDMA");
    return lib;
  }
  std::string why;
  // The versions a link against libibverbs binds (nm -D libkolo.so, when it
  // linked -libverbs): IBVERBS_1.1 where a 1.0 compatibility version exists
  // too, else the function's only version.
  const bool ok =
      resolve(handle, file, "ibv_get_device_list", "IBVERBS_1.1", &lib.get_device_list, &why) &&
      resolve(handle, file, "ibv_free_device_list", "IBVERBS_1.1", &lib.free_device_list, &why) &&
      resolve(handle, file, "ibv_get_device_name", "IBVERBS_1.1", &lib.get_device_name, &why) &&
      resolve(handle, file, "ibv_open_device", "IBVERBS_1.1", &lib.open_device, &why) &&
      resolve(handle, file, "ibv_close_device", "IBVERBS_1.1", &lib.close_device, &why) &&
      resolve(handle, file, "ibv_query_device", "IBVERBS_1.1", &lib.query_device, &why) &&
      resolve(handle, file, "ibv_query_port", "IBVERBS_1.1", &lib.query_port_compat_, &why) &&
      resolve(handle, file, "_ibv_query_gid_ex", "IBVERBS_1.11", &lib.query_gid_ex_sized_, &why) &&
      resolve(handle, file, "ibv_alloc_pd", "IBVERBS_1.1", &lib.alloc_pd, &why) &&
      resolve(handle, file, "ibv_dealloc_pd", "IBVERBS_1.1", &lib.dealloc_pd, &why) &&
      resolve(handle, file, "ibv_reg_mr", "IBVERBS_1.1", &lib.reg_mr, &why) &&
      resolve(handle, file, "ibv_dereg_mr", "IBVERBS_1.1", &lib.dereg_mr, &why) &&
      resolve(handle, file, "ibv_create_comp_channel", "IBVERBS_1.0", &lib.create_comp_channel, &why) &&
      resolve(handle, file, "ibv_destroy_comp_channel", "IBVERBS_1.0", &lib.destroy_comp_channel, &why) &&
      resolve(handle, file, "ibv_create_cq", "IBVERBS_1.1", &lib.create_cq, &why) &&
      resolve(handle, file, "ibv_destroy_cq", "IBVERBS_1.1", &lib.destroy_cq, &why) &&
      resolve(handle, file, "ibv_get_cq_event", "IBVERBS_1.1", &lib.get_cq_event, &why) &&
      resolve(handle, file, "ibv_ack_cq_events", "IBVERBS_1.1", &lib.ack_cq_events, &why) &&
      resolve(handle, file, "ibv_create_qp", "IBVERBS_1.1", &lib.create_qp, &why) &&
      resolve(handle, file, "ibv_destroy_qp", "IBVERBS_1.1", &lib.destroy_qp, &why) &&
      resolve(handle, file, "ibv_modify_qp", "IBVERBS_1.1", &lib.modify_qp, &why) &&
      resolve(handle, file, "ibv_get_async_event", "IBVERBS_1.1", &lib.get_async_event, &why) &&
      resolve(handle, file, "ibv_ack_async_event", "IBVERBS_1.1", &lib.ack_async_event, &why) &&
      resolve(handle, file, "ibv_event_type_str", "IBVERBS_1.1", &lib.event_type_str, &why) &&
      resolve(handle, file, "ibv_wc_status_str", "IBVERBS_1.1", &lib.wc_status_str, &why);
  if (!ok) {
    // Half a table is no table: every pointer goes back to null.
    VerbsLibrary none;
    none.file_ = file;
    none.status_ = unsupported(why);
    return none;
  }
  std::string ignored;
  if (!resolve(handle, file, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", &lib.reg_dmabuf_mr, &ignored)) {
    lib.reg_dmabuf_mr = nullptr;
  }
  lib.status_ = Status::ok();
  return lib;
}

const VerbsLibrary& VerbsLibrary::get() {
  static std::once_flag once;
  static VerbsLibrary* library = nullptr;  // never destroyed: used until the process ends
  std::call_once(once, [] {
    const char* named = std::getenv("KOLO_IBVERBS_LIBRARY");
    library = new VerbsLibrary(load(named && *named ? named : kDefaultFile));
    // Not having it is the ordinary case, said by the caller that asked
    // for RDMA (at debug level unless RDMA was demanded).
    if (library->loaded()) KOLO_DEBUG("loaded " << library->file());
  });
  return *library;
}

int VerbsLibrary::query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr) const {
  // As the header's ___ibv_query_port: the provider's own op where it has
  // one, else the exported call, which fills the older, shorter layout.
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (!vctx) {
    std::memset(port_attr, 0, sizeof(*port_attr));
    return query_port_compat_(context, port_num, reinterpret_cast<_compat_ibv_port_attr*>(port_attr));
  }
  return vctx->query_port(context, port_num, port_attr, sizeof(*port_attr));
}

int VerbsLibrary::query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                               uint32_t flags) const {
  return query_gid_ex_sized_(context, port_num, gid_index, entry, flags, sizeof(*entry));
}

const VerbsLibrary& verbs() {
  const VerbsLibrary& library = VerbsLibrary::get();
  if (!library.loaded()) {
    std::fprintf(stderr, "kolo bug: a verbs call without libibverbs: %s\n", library.status().message().c_str());
    std::abort();
  }
  return library;
}

}  // namespace kolo
