// libibverbs, loaded at run time (as NCCL's ibvwrap does), so that
// libkolo.so does not need it to load: most machines (a fresh Debian, most
// users of a wheel) have no libibverbs1, and kolo's TCP and shared-memory
// jobs must run there. libibverbs.so.1 is opened the first time RDMA is
// considered (IbTransport::create, query_ib_devices, IbDeviceContext::get),
// once per process (std::call_once), with dlopen(RTLD_NOW), and never closed
// (the application may use the library too); every verbs call of
// transport/ib/ goes through this table. Where the library cannot be opened,
// or lacks a function below, RDMA is unavailable: the device list is empty,
// as on a machine with no RDMA device, and status() says why (an error only
// where RDMA is demanded, KOLO_TRANSPORT=ib).
//
// The table holds exactly the exported functions the header's calls bind
// to, each at the symbol version a link against libibverbs binds it to
// (dlvsym): the functions that also have a 1.0 compatibility version bind
// IBVERBS_1.1, whose contexts the rest of the library and the providers
// expect (the 1.0 ABI's would crash the current calls). Some of the header's
// "functions" are inline code, re-expressed here over the table:
//  - ibv_query_port: a macro to an inline that asks the context's
//    query_port op and falls back to the exported ibv_query_port
//    (query_port() below);
//  - ibv_query_gid_ex: an inline over _ibv_query_gid_ex@IBVERBS_1.11 with
//    the entry's size (query_gid_ex() below);
//  - ibv_reg_mr: a macro that calls ibv_reg_mr@IBVERBS_1.1 for access
//    flags that are constants without IBV_ACCESS_OPTIONAL_RANGE bits, as
//    kolo's are (reg_mr below);
//  - ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq: inline
//    calls through the context's ops, which need no symbol: transport/ib/
//    calls them from the header as before.
// The types and constants stay the header's (<infiniband/verbs.h>, from
// libibverbs-dev, is needed to build, not to run). Nothing here may call an
// exported ibv_* function directly: bindings/c/exports_test.sh checks that
// libkolo.so has no libibverbs in NEEDED and no ibv_ symbol to bind.
//
// KOLO_IBVERBS_LIBRARY names another file to open instead (a libibverbs
// outside the loader's path, or a name that does not exist to test a
// machine without one); read once, at the first load.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

class VerbsLibrary {
 public:
  // The process's library: loaded by the first call (any thread), never
  // unloaded.
  static const VerbsLibrary& get();
  // Opens `file` afresh (for tests; the process uses get()). Never fails:
  // status() says whether it loaded.
  static VerbsLibrary load(const std::string& file);

  bool loaded() const { return status_.is_ok(); }
  // OK, or UNSUPPORTED saying why RDMA is unavailable:
  // "libibverbs.so.1 could not be loaded (<dlerror>): install rdma-core's
  // libibverbs1 ...", or which function the library lacks.
  const Status& status() const { return status_; }
  // The file opened (KOLO_IBVERBS_LIBRARY or libibverbs.so.1).
  const std::string& file() const { return file_; }

  // ibv_* with the prefix dropped (the header defines some ibv_* names as
  // macros). Set only when loaded(), each of them, except reg_dmabuf_mr.
  decltype(&::ibv_get_device_list) get_device_list = nullptr;
  decltype(&::ibv_free_device_list) free_device_list = nullptr;
  decltype(&::ibv_get_device_name) get_device_name = nullptr;
  decltype(&::ibv_open_device) open_device = nullptr;
  decltype(&::ibv_close_device) close_device = nullptr;
  decltype(&::ibv_query_device) query_device = nullptr;
  decltype(&::ibv_alloc_pd) alloc_pd = nullptr;
  decltype(&::ibv_dealloc_pd) dealloc_pd = nullptr;
  decltype(&::ibv_reg_mr) reg_mr = nullptr;
  // IBVERBS_1.12 (rdma-core 34 and newer); null in an older library, where
  // only the dma-buf way of registering GPU memory is missing.
  decltype(&::ibv_reg_dmabuf_mr) reg_dmabuf_mr = nullptr;
  decltype(&::ibv_dereg_mr) dereg_mr = nullptr;
  decltype(&::ibv_create_comp_channel) create_comp_channel = nullptr;
  decltype(&::ibv_destroy_comp_channel) destroy_comp_channel = nullptr;
  decltype(&::ibv_create_cq) create_cq = nullptr;
  decltype(&::ibv_destroy_cq) destroy_cq = nullptr;
  decltype(&::ibv_get_cq_event) get_cq_event = nullptr;
  decltype(&::ibv_ack_cq_events) ack_cq_events = nullptr;
  decltype(&::ibv_create_qp) create_qp = nullptr;
  decltype(&::ibv_destroy_qp) destroy_qp = nullptr;
  decltype(&::ibv_modify_qp) modify_qp = nullptr;
  decltype(&::ibv_get_async_event) get_async_event = nullptr;
  decltype(&::ibv_ack_async_event) ack_async_event = nullptr;
  decltype(&::ibv_event_type_str) event_type_str = nullptr;
  decltype(&::ibv_wc_status_str) wc_status_str = nullptr;

  // The header's inline ibv_query_port and ibv_query_gid_ex.
  int query_port(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr) const;
  int query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                   uint32_t flags) const;

 private:
  // The exported ibv_query_port (the compat layout) and _ibv_query_gid_ex.
  decltype(&::ibv_query_port) query_port_compat_ = nullptr;
  decltype(&::_ibv_query_gid_ex) query_gid_ex_sized_ = nullptr;

  Status status_ = unsupported("libibverbs not loaded yet");
  std::string file_;
};

// The process's library, for transport/ib/'s calls once RDMA is in use (an
// open device, a queue pair): only reached after get().loaded() was seen
// true, and aborts naming the bug otherwise.
const VerbsLibrary& verbs();

}  // namespace kolo
