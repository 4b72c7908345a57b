// What a machine offers NCCL for networking, as plain data: RDMA devices (libibverbs), their ports and GID
// tables, and the host's network interfaces. Filled from the hardware by rdma_probe.h, or read from a
// recorded text file (tests/doctor/recorded/*.txt) so that everything downstream — the NCCL settings, the
// warnings, the report — is a pure function that tests can check for machines we do not have.
#pragma once

#include <absl/status/statusor.h>

#include <string>
#include <vector>

namespace nanoforge {

enum class PortState { kDown, kInit, kArmed, kActive, kUnknown };
enum class LinkLayer { kInfiniBand, kEthernet, kUnknown };
// IB: a native InfiniBand GID. RoCE v1 is an Ethernet-frame (L2-only) GID; RoCE v2 is UDP/IP, routable,
// and what NCCL uses by default (NCCL_IB_ROCE_VERSION_NUM=2).
enum class GidType { kIb, kRoceV1, kRoceV2, kUnknown };

struct RdmaGid {
  int index = 0;
  std::string gid;  // as sysfs writes it: 8 groups of 4 hex digits, e.g. 0000:...:ffff:c0a8:640a
  GidType type = GidType::kUnknown;
  std::string netdev;  // gid_attrs/ndevs/<index>; empty for InfiniBand GIDs
};

struct RdmaPort {
  int number = 1;  // ports are numbered from 1
  PortState state = PortState::kUnknown;
  std::string physical_state;  // "LinkUp", "Disabled", "Polling", ...
  LinkLayer link_layer = LinkLayer::kUnknown;
  int active_mtu_bytes = 0;  // the RDMA MTU (256..4096); RoCE derives it from the netdev MTU
  int max_mtu_bytes = 0;
  int width_lanes = 0;        // active width: 1, 2, 4, 8 or 12 lanes
  std::string speed_name;     // active speed per lane: SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR
  std::string netdev;         // the Ethernet/IPoIB interface of this port, when known
  std::vector<RdmaGid> gids;  // non-zero entries only

  // Lanes x per-lane rate of speed_name (0 when unknown), as sysfs "rate" and ibstat show it.
  double rate_gbps() const;
};

struct RdmaDevice {
  std::string name;         // e.g. "rocep1s0f0", "mlx5_0"
  std::string pci_address;  // e.g. "0002:01:00.0"; empty when not a PCI device
  std::string firmware;
  int vendor_part_id = 0;  // 4129 = ConnectX-7, 4123 = ConnectX-6, 4117 = ConnectX-4 Lx
  std::vector<RdmaPort> ports;
};

struct NetInterface {
  std::string name;
  bool up = false;  // administratively up and with carrier (IFF_UP and IFF_RUNNING)
  bool loopback = false;
  int mtu = 0;
  std::vector<std::string> ipv4;
  std::vector<std::string> ipv6;
};

struct RdmaInventory {
  std::string description;  // what machine this is (recorded files) or "this machine"
  std::vector<RdmaDevice> devices;
  std::vector<NetInterface> interfaces;
  std::string default_route_interface;  // from /proc/net/route; empty when there is no default route
  std::vector<std::string> notes;       // what the probe noticed, e.g. why no device is listed

  const NetInterface* find_interface(const std::string& name) const;
};

// Per-lane Gb/s of an InfiniBand speed name (what the kernel reports for RoCE too); 0 when unknown.
double lane_rate_gbps(const std::string& speed_name);
int mtu_enum_to_bytes(int ibv_mtu);  // IBV_MTU_256 (1) .. IBV_MTU_4096 (5); 0 when out of range

const char* to_string(PortState state);
const char* to_string(LinkLayer layer);
const char* to_string(GidType type);

// The recorded text format, one record per line, `key=value` fields, '#' comments:
//   description DGX Spark, one QSFP112 cable in cage 0
//   device rocep1s0f0 pci=0000:01:00.0 fw=28.45.1200 part=4129
//   port 1 state=ACTIVE phys=LinkUp link=Ethernet mtu=4096 max_mtu=4096 width=4X speed=HDR netdev=enp1s0f0np0
//   gid 3 0000:0000:0000:0000:0000:ffff:c0a8:640a type=RoCEv2 netdev=enp1s0f0np0
//   interface enp1s0f0np0 up=1 mtu=9000 ipv4=192.168.100.10 ipv6=fe80::3e6d:66ff:fecc:b3b6
//   route default enP7s7
//   note /sys/class/infiniband does not exist: no RDMA driver is loaded
// `port` belongs to the last `device`, `gid` to the last `port`; description and note take the rest of the
// line. Errors name the line.
absl::StatusOr<RdmaInventory> parse_rdma_inventory(const std::string& text);
absl::StatusOr<RdmaInventory> read_rdma_inventory_file(const std::string& path);
std::string format_rdma_inventory(const RdmaInventory& inventory);

}  // namespace nanoforge
