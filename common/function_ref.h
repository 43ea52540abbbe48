// A callable passed down a call, without owning it: what std::function is
// for a callable that is kept, this is for one that is only called before
// the call returns. std::function copies a lambda of more than two
// pointers' captures onto the heap; on the path of a small collective that
// allocation is a tenth of the call.
//
// The callable must outlive the FunctionRef: pass a lambda as an argument
// (it lives until the call returns), never store a FunctionRef.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace kolo {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  // None: a callback that is optional (test it with `if (f)`).
  FunctionRef(std::nullptr_t) : object_(nullptr), call_(nullptr) {}  // NOLINT: as std::function takes nullptr
  template <typename F, typename = std::enable_if_t<!std::is_same<std::decay_t<F>, FunctionRef>::value &&
                                                    std::is_invocable_r<R, F&, Args...>::value>>
  FunctionRef(F&& f)  // NOLINT: converts from any callable, as std::function does
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }
  explicit operator bool() const { return call_ != nullptr; }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace kolo
