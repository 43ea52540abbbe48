// Finding the RDMA device, port and GID to use. The choice is a pure
// function of what the verbs library reports (so it is tested with made-up
// device lists); query_ib_devices() asks the real library.
//
// Default choice, as NCCL makes it: the first device with an ACTIVE port;
// on RoCE (Ethernet link layer) the first RoCE v2 GID holding an IPv4
// address (::ffff:a.b.c.d), else the first RoCE v2 GID, else the first
// non-zero one; on InfiniBand GID 0 and the port's LID. KOLO_IB_DEV,
// KOLO_IB_PORT and KOLO_IB_GID_INDEX override each step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo {

struct IbGidEntry {
  int index = 0;
  uint8_t raw[16] = {};
  bool roce_v2 = false;
};

struct IbPortInfo {
  int number = 1;
  bool active = false;
  bool ethernet = false;  // RoCE; else InfiniBand
  uint8_t active_mtu = 0;  // enum ibv_mtu
  uint16_t lid = 0;
  std::vector<IbGidEntry> gids;  // the valid (non-empty) entries of the table
};

struct IbDeviceInfo {
  std::string name;
  std::vector<IbPortInfo> ports;
};

struct IbSettings {
  std::string device;  // KOLO_IB_DEV; empty: the first with an active port
  int port = 0;        // KOLO_IB_PORT; 0: the device's first active port
  int gid_index = -1;  // KOLO_IB_GID_INDEX; -1: chosen as above
};

struct IbChoice {
  std::string device;
  int port = 0;
  int gid_index = 0;
  uint8_t gid[16] = {};
  uint8_t mtu = 0;
  uint16_t lid = 0;
  bool ethernet = false;

  // "rxe0 port 1 GID 1 (RoCE v2, ::ffff:10.0.2.15), MTU 1024"
  std::string describe() const;
};

// UNSUPPORTED ("no RDMA device ...") when nothing usable exists, which is
// the caller's cue to fall back to TCP; INVALID_ARGUMENT when an override
// names a device, port or GID that is not there.
Status choose_ib_port(const std::vector<IbDeviceInfo>& devices, const IbSettings& settings, IbChoice* out);

// Every device the verbs library sees, with its ports and GID tables; none,
// and no error, where libibverbs cannot be loaded (VerbsLibrary::get().status()
// says why).
Status query_ib_devices(std::vector<IbDeviceInfo>* out);

// "::ffff:10.0.2.15" or "fe80::...:1" for a raw GID.
std::string gid_to_string(const uint8_t raw[16]);

}  // namespace kolo
