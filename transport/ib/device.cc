#include "transport/ib/device.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "transport/ib/verbs_library.h"

namespace kolo {

namespace {

bool is_zero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; ++i) {
    if (raw[i] != 0) return false;
  }
  return true;
}

bool is_ipv4_mapped(const uint8_t raw[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(raw, prefix, sizeof(prefix)) == 0;
}

const IbGidEntry* pick_gid(const IbPortInfo& port, int wanted, std::string* why) {
  if (wanted >= 0) {
    for (const auto& g : port.gids) {
      if (g.index == wanted) return &g;
    }
    *why = "has no valid GID at index " + std::to_string(wanted);
    return nullptr;
  }
  if (!port.ethernet) {
    for (const auto& g : port.gids) {
      if (g.index == 0) return &g;
    }
  }
  const IbGidEntry* any_v2 = nullptr;
  const IbGidEntry* any = nullptr;
  for (const auto& g : port.gids) {
    if (is_zero(g.raw)) continue;
    if (g.roce_v2 && is_ipv4_mapped(g.raw)) return &g;
    if (g.roce_v2 && !any_v2) any_v2 = &g;
    if (!any) any = &g;
  }
  if (any_v2) return any_v2;
  if (any) return any;
  *why = "has no valid GID";
  return nullptr;
}

std::string device_names(const std::vector<IbDeviceInfo>& devices) {
  std::string names;
  for (const auto& d : devices) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

}  // namespace

std::string gid_to_string(const uint8_t raw[16]) {
  char text[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, raw, text, sizeof(text))) return "?";
  return text;
}

std::string IbChoice::describe() const {
  static const int kMtuBytes[] = {0, 256, 512, 1024, 2048, 4096};
  std::string s = device + " port " + std::to_string(port) + " GID " + std::to_string(gid_index) + " (" +
                  (ethernet ? "RoCE, " : "InfiniBand, LID " + std::to_string(lid) + ", ") + gid_to_string(gid) +
                  ")";
  if (mtu >= 1 && mtu <= 5) s += ", MTU " + std::to_string(kMtuBytes[mtu]);
  return s;
}

Status choose_ib_port(const std::vector<IbDeviceInfo>& devices, const IbSettings& settings, IbChoice* out) {
  if (devices.empty()) return unsupported("no RDMA device: the verbs library found none");
  bool device_found = false;
  bool port_found = false;
  std::string passed_over;  // why each candidate was not taken, for the error
  for (const auto& d : devices) {
    if (!settings.device.empty() && d.name != settings.device) continue;
    device_found = true;
    for (const auto& p : d.ports) {
      if (settings.port != 0 && p.number != settings.port) continue;
      port_found = true;
      const std::string where = d.name + " port " + std::to_string(p.number);
      std::string why = "is not active";
      const IbGidEntry* gid = p.active ? pick_gid(p, settings.gid_index, &why) : nullptr;
      if (!gid) {
        if (p.active && settings.gid_index >= 0) return invalid_argument("KOLO_IB_GID_INDEX: " + where + " " + why);
        passed_over += (passed_over.empty() ? "" : "; ") + where + " " + why;
        continue;
      }
      IbChoice c;
      c.device = d.name;
      c.port = p.number;
      c.gid_index = gid->index;
      std::memcpy(c.gid, gid->raw, sizeof(c.gid));
      c.mtu = p.active_mtu;
      c.lid = p.lid;
      c.ethernet = p.ethernet;
      *out = c;
      return Status::ok();
    }
  }
  if (!device_found) {
    return invalid_argument("KOLO_IB_DEV=" + settings.device + ": no such RDMA device (found: " +
                            device_names(devices) + ")");
  }
  if (!port_found) return invalid_argument("KOLO_IB_PORT=" + std::to_string(settings.port) + ": no such port");
  return unsupported("no RDMA device with an active port: " + passed_over);
}

Status query_ib_devices(std::vector<IbDeviceInfo>* out) {
  out->clear();
  // Without libibverbs there is no device to use, as without RDMA hardware.
  const VerbsLibrary& ibv = VerbsLibrary::get();
  if (!ibv.loaded()) return Status::ok();
  int count = 0;
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> list(ibv.get_device_list(&count), ibv.free_device_list);
  if (!list) {
    // ENOSYS: no kernel support at all; either way there is nothing to use.
    if (errno == ENOSYS || errno == 0) return Status::ok();
    return errno_error(Code::kTransport, "ibv_get_device_list", errno);
  }
  for (int i = 0; i < count; ++i) {
    IbDeviceInfo info;
    info.name = ibv.get_device_name(list.get()[i]);
    std::unique_ptr<ibv_context, int (*)(ibv_context*)> ctx(ibv.open_device(list.get()[i]), ibv.close_device);
    if (!ctx) continue;  // listed but unusable (permissions): not a candidate
    ibv_device_attr attr{};
    if (ibv.query_device(ctx.get(), &attr) != 0) continue;
    for (int port = 1; port <= attr.phys_port_cnt; ++port) {
      ibv_port_attr pattr{};
      if (ibv.query_port(ctx.get(), static_cast<uint8_t>(port), &pattr) != 0) continue;
      IbPortInfo p;
      p.number = port;
      p.active = pattr.state == IBV_PORT_ACTIVE;
      p.ethernet = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
      p.active_mtu = static_cast<uint8_t>(pattr.active_mtu);
      p.lid = pattr.lid;
      for (int g = 0; g < pattr.gid_tbl_len; ++g) {
        ibv_gid_entry entry{};
        if (ibv.query_gid_ex(ctx.get(), static_cast<uint32_t>(port), static_cast<uint32_t>(g), &entry, 0) != 0) {
          continue;  // an empty slot of the table
        }
        IbGidEntry e;
        e.index = g;
        std::memcpy(e.raw, entry.gid.raw, sizeof(e.raw));
        e.roce_v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
        if (!is_zero(e.raw)) p.gids.push_back(e);
      }
      info.ports.push_back(p);
    }
    out->push_back(info);
  }
  return Status::ok();
}

}  // namespace kolo
