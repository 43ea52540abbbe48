// kolo as one device's backend of a torch.distributed group whose other
// devices another backend serves (init_process_group("cpu:kolo,cuda:nccl")).
//
// torch keeps a backend per device only as a C++ c10d::Backend, and torch
// 2.13 gives Python no Backend to subclass; kolo's group is a Python
// ProcessGroup (kolo/torch/distributed/process_group.py). KoloDeviceBackend is the C++
// Backend that hands every operation to that Python group, under the GIL,
// and returns its work in torch's PyWorkHolder, which keeps the Python work
// alive for as long as C++ holds it. Built on first use of such a map by
// kolo/torch/_device_backend.py (torch's cpp_extension), against the torch
// that runs.
#include <pybind11/chrono.h>  // the barrier's timeout reaches Python as a timedelta
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PyProcessGroup.hpp>
#include <torch/extension.h>

namespace {

namespace py = pybind11;
using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;
using Tensors = std::vector<at::Tensor>;
using TensorLists = std::vector<std::vector<at::Tensor>>;

class KoloDeviceBackend : public c10d::Backend {
 public:
  explicit KoloDeviceBackend(py::object group)
      : Backend(group.attr("rank")().cast<int>(), group.attr("size")().cast<int>()), group_(std::move(group)) {}

  ~KoloDeviceBackend() override {
    py::gil_scoped_acquire gil;  // the Python group is let go under the GIL
    group_ = py::object();
  }

  const std::string getBackendName() const override { return "kolo"; }

  WorkPtr broadcast(Tensors& t, const c10d::BroadcastOptions& o) override { return call("broadcast", t, o); }
  WorkPtr allreduce(Tensors& t, const c10d::AllreduceOptions& o) override { return call("allreduce", t, o); }
  WorkPtr allreduce_coalesced(Tensors& t, const c10d::AllreduceCoalescedOptions& o) override {
    return call("allreduce_coalesced", t, o);
  }
  WorkPtr reduce(Tensors& t, const c10d::ReduceOptions& o) override { return call("reduce", t, o); }
  WorkPtr allgather(TensorLists& out, Tensors& in, const c10d::AllgatherOptions& o) override {
    return call("allgather", out, in, o);
  }
  WorkPtr _allgather_base(at::Tensor& out, at::Tensor& in, const c10d::AllgatherOptions& o) override {
    return call("_allgather_base", out, in, o);
  }
  WorkPtr allgather_coalesced(TensorLists& out, Tensors& in, const c10d::AllgatherOptions& o) override {
    return call("allgather_coalesced", out, in, o);
  }
  WorkPtr allgather_into_tensor_coalesced(Tensors& out, Tensors& in, const c10d::AllgatherOptions& o) override {
    return call("allgather_into_tensor_coalesced", out, in, o);
  }
  WorkPtr gather(TensorLists& out, Tensors& in, const c10d::GatherOptions& o) override {
    return call("gather", out, in, o);
  }
  WorkPtr scatter(Tensors& out, TensorLists& in, const c10d::ScatterOptions& o) override {
    return call("scatter", out, in, o);
  }
  WorkPtr reduce_scatter(Tensors& out, TensorLists& in, const c10d::ReduceScatterOptions& o) override {
    return call("reduce_scatter", out, in, o);
  }
  WorkPtr _reduce_scatter_base(at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) override {
    return call("_reduce_scatter_base", out, in, o);
  }
  WorkPtr reduce_scatter_tensor_coalesced(Tensors& out, Tensors& in, const c10d::ReduceScatterOptions& o) override {
    return call("reduce_scatter_tensor_coalesced", out, in, o);
  }
  WorkPtr alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                        std::vector<int64_t>& in_splits, const c10d::AllToAllOptions& o) override {
    return call("alltoall_base", out, in, out_splits, in_splits, o);
  }
  WorkPtr alltoall(Tensors& out, Tensors& in, const c10d::AllToAllOptions& o) override {
    return call("alltoall", out, in, o);
  }
  WorkPtr send(Tensors& t, int dst, int tag) override { return call("send", t, dst, tag); }
  WorkPtr recv(Tensors& t, int src, int tag) override { return call("recv", t, src, tag); }
  WorkPtr recvAnysource(Tensors& t, int tag) override { return call("recv_anysource", t, tag); }
  WorkPtr barrier(const c10d::BarrierOptions& o) override { return call("barrier", o); }

  void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) override {
    py::gil_scoped_acquire gil;
    group_.attr("monitored_barrier")(o.timeout, wait_all_ranks);
  }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override {
    py::gil_scoped_acquire gil;
    group_.attr("_start_coalescing")(py::none());
  }
  WorkPtr endCoalescing() override { return call("_end_coalescing", py::none()); }
  void abort() override {
    py::gil_scoped_acquire gil;
    group_.attr("abort")();
  }
  void shutdown() override {
    py::gil_scoped_acquire gil;
    group_.attr("shutdown")();
  }

  // torch.distributed.shrink_group (torch 2.13) on a group this backend
  // serves: the Python group shrinks (kolo_comm_shrink), and the shrunk one
  // is the new group's backend, which can shrink again.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
                                            const c10::intrusive_ptr<Options>& opts_override) override {
    TORCH_CHECK(!opts_override, "kolo: a shrunk group keeps its group's settings (its timeout); pg_options must be None");
    py::gil_scoped_acquire gil;
    py::object shrunk = group_.attr("_shrunk")(ranks_to_exclude, shrink_flags);
    return c10::make_intrusive<KoloDeviceBackend>(std::move(shrunk));
  }

  // The group's deadline as torch's options show a backend's timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override {
    py::gil_scoped_acquire gil;
    const double seconds = group_.attr("_deadline_s").cast<double>();
    return c10::make_intrusive<Options>("kolo", std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  }

  py::object group() const { return group_; }

 private:
  template <typename... Args>
  WorkPtr call(const char* name, Args&&... args) {
    py::gil_scoped_acquire gil;
    py::object work = group_.attr(name)(std::forward<Args>(args)...);
    return c10::make_intrusive<c10d::PyProcessGroup::PyWorkHolder>(std::move(work));
  }

  py::object group_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "kolo's Python process group as a c10d Backend of one device";
  // Registered so that torch's _get_backend shows kolo's: its options (the
  // timeout) and its Python group.
  py::class_<KoloDeviceBackend, c10d::Backend, c10::intrusive_ptr<KoloDeviceBackend>>(m, "KoloDeviceBackend")
      .def_property_readonly("options", &KoloDeviceBackend::getBackendOptions)
      .def_property_readonly("group", &KoloDeviceBackend::group);
  m.def(
      "device_backend",
      [](py::object group) {
        return c10::intrusive_ptr<c10d::Backend>(c10::make_intrusive<KoloDeviceBackend>(std::move(group)));
      },
      "A c10d Backend that forwards every operation to kolo's Python group");
}
