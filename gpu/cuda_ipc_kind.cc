// CUDA IPC as a kind of transport (transport/kind.h) that carries device
// memory: ranks of one host that both allow it (KOLO_CUDA_IPC) map each
// other's GPU buffers. Chosen per peer at the rendezvous like the host
// transports, so both ends of a pair agree (a rank with KOLO_CUDA_IPC=0
// makes its peers stage to it too); the GPU context opens it (open_over)
// over the host's staged transport at the first collective on device
// buffers.
#include "gpu/device.h"
#include "gpu/ipc_transport.h"
#include "transport/kind.h"

namespace kolo {
namespace {

class CudaIpcKind final : public TransportKind {
 public:
  const char* name() const override { return "cuda_ipc"; }
  Carries carries() const override { return Carries::kDeviceMemory; }
  std::vector<std::string> settings() const override { return {"KOLO_CUDA_IPC"}; }

  Status offer(const TransportContext& c, std::string* offer, std::unique_ptr<DirectTransport>*) const override {
    if (!c.settings.flag("KOLO_CUDA_IPC", true)) return unsupported("KOLO_CUDA_IPC=0");
    *offer = "1";
    return Status::ok();
  }

  bool reaches(const Peer& a, const Peer& b, int, std::string* why_not) const override {
    if (a.host != b.host) {
      *why_not = "another machine";
      return false;
    }
    if (!a.offer || !b.offer) {
      *why_not = "KOLO_CUDA_IPC=0 on one end";
      return false;
    }
    return true;
  }

  Status open(const TransportContext&, std::unique_ptr<DirectTransport>*) const override {
    return unsupported("CUDA IPC opens over the host's transport (open_over)");
  }
  Status open_over(Transport* below, void* device, const std::vector<bool>& reached,
                   std::unique_ptr<Transport>* out) const override {
    if (!below || !device) return invalid_argument("CUDA IPC opens over a transport, for a device");
    *out = std::make_unique<IpcTransport>(below, static_cast<Device*>(device), reached);
    return Status::ok();
  }
};

const TransportRegistration registration(5, std::make_unique<CudaIpcKind>());

}  // namespace
}  // namespace kolo
