// What the C API's source files share: the handle structs behind the opaque
// C types, and the wrapper that turns Status and exceptions into result codes.
#pragma once

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "bindings/c/kolo.h"
#include "runtime/communicator_handle.h"

// The communicator and its engine side by side (communicator_handle.h).
struct kolo_comm : kolo::CommunicatorHandle {
  using kolo::CommunicatorHandle::CommunicatorHandle;
  kolo::Communicator* impl() const { return comm(); }
};

struct kolo_handle {
  std::shared_ptr<kolo::OpHandle> impl;
};

namespace kolo_c {

// The calling thread's last error message.
std::string& last_error();

inline kolo_result_t report(const kolo::Status& s) {
  if (s.is_ok()) return KOLO_SUCCESS;
  last_error() = s.to_string();
  return static_cast<kolo_result_t>(s.code());
}

inline kolo_result_t null_comm() { return report(kolo::invalid_argument("comm is NULL")); }

// C callers may pass any int as a kolo_dtype_t or kolo_op_t. In C++ reading
// an out-of-range value as the enum is undefined, so the value is taken from
// the object's bytes and validated as an int.
template <typename Enum>
int raw_enum(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

// A C caller's dtype and op as the C++ API takes them, read by reference
// as raw_enum reads them (a copy would load the C enum). Any int converts
// (the C++ enums have int underneath); the C++ API refuses a value that is
// none of them, naming it.
inline kolo::DataType dtype_of(const kolo_dtype_t& d) { return static_cast<kolo::DataType>(raw_enum(d)); }
inline kolo::ReduceOp op_of(const kolo_op_t& o) { return static_cast<kolo::ReduceOp>(raw_enum(o)); }

// Runs `fn` (returning Status) with every exception turned into an error.
template <typename Fn>
kolo_result_t guarded(Fn&& fn) noexcept {
  try {
    return report(fn());
  } catch (const std::bad_alloc&) {
    return report(kolo::internal_error("out of memory"));
  } catch (const std::exception& e) {
    return report(kolo::internal_error(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(kolo::internal_error("unexpected exception"));
  }
}

// The three ways the C API launches a collective (kolo::Launch): `call`
// takes the Launch, checks the arguments and runs or queues the operation.
template <typename Call>
kolo_result_t blocking(kolo_comm_t comm, Call&& call) noexcept {
  if (!comm) return null_comm();
  return guarded([&] { return call(kolo::Launch{}); });
}

template <typename Call>
kolo_result_t on_stream(kolo_comm_t comm, void* stream, Call&& call) noexcept {
  if (!comm) return null_comm();
  return guarded([&] { return call(kolo::Launch::on(stream)); });
}

// kolo_*_async: *handle is set only when the operation was queued (a bad
// argument or a failed communicator is returned at once, with no handle).
template <typename Call>
kolo_result_t asynchronous(kolo_comm_t comm, kolo_handle_t* handle, Call&& call) noexcept {
  if (!comm) return null_comm();
  return guarded([&] {
    if (!handle) return kolo::invalid_argument("handle output pointer is NULL");
    *handle = nullptr;
    auto h = std::make_unique<kolo_handle>();
    h->impl = std::make_shared<kolo::OpHandle>();
    kolo::Launch launch;
    launch.done.push_back(h->impl);
    KOLO_RETURN_IF_ERROR(call(std::move(launch)));
    *handle = h.release();
    return kolo::Status::ok();
  });
}

}  // namespace kolo_c
