// advise_nccl: the rules of nccl_env_advice.h, applied to an inventory (docs/doctor.md lists them). What the
// user's environment does to the advice is nccl_env_review.cpp.
#include "doctor/nccl_env_advice.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace nanoforge {

std::string port_subject(const std::string& device, int port) {
  return fmt::format("{} port {}", device, port);
}

bool has_address(const NetInterface& interface) {
  return !interface.ipv4.empty() || !interface.ipv6.empty();
}

namespace {

// Thresholds, from NVIDIA's DGX Spark playbooks (docs/doctor.md): a Spark's CX-7 links at 200 Gb/s per half
// with an approved QSFP112 cable; RoCE wants jumbo frames (MTU 9000, i.e. the 4096-byte RDMA MTU).
constexpr double kSlowLinkGbps = 100;
constexpr double kSparkHalfGbps = 200;
constexpr int kJumboMtuBytes = 9000;
constexpr int kLargestRdmaMtuBytes = 4096;

// The 16 bytes of a GID written the sysfs way; false when it does not parse.
bool gid_bytes(const std::string& gid, std::array<unsigned char, 16>& bytes) {
  return inet_pton(AF_INET6, gid.c_str(), bytes.data()) == 1;
}

// An IPv4-mapped GID (::ffff:a.b.c.d) is how RoCE carries an interface's IPv4 address.
bool gid_carries_ipv4(const std::string& gid) {
  std::array<unsigned char, 16> bytes{};
  if (!gid_bytes(gid, bytes)) return false;
  return std::all_of(bytes.begin(), bytes.begin() + 10, [](unsigned char b) { return b == 0; }) &&
         bytes[10] == 0xff && bytes[11] == 0xff;
}

// The GID NCCL should use on a RoCE port: v2 with IPv4 first (what NCCL's own auto-selection prefers with the
// default NCCL_SOCKET_FAMILY), then any v2, then v1 with IPv4, then any v1. nullptr when the table is empty.
const RdmaGid* choose_gid(const RdmaPort& port) {
  const std::array<std::pair<GidType, bool>, 4> preference = {{{GidType::kRoceV2, true},
                                                               {GidType::kRoceV2, false},
                                                               {GidType::kRoceV1, true},
                                                               {GidType::kRoceV1, false}}};
  for (const auto& [type, needs_ipv4] : preference) {
    for (const RdmaGid& gid : port.gids)
      if (gid.type == type && (!needs_ipv4 || gid_carries_ipv4(gid.gid))) return &gid;
  }
  return nullptr;
}

bool usable_for_sockets(const NetInterface* interface) {
  return interface != nullptr && interface->up && !interface->loopback && has_address(*interface);
}

// Interfaces NCCL itself skips by default (docker bridges, libvirt, veth pairs).
bool virtual_interface(const std::string& name) {
  for (const char* prefix : {"docker", "virbr", "veth", "br-", "cni", "flannel"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// The interface for NCCL's sockets: `preferred` if usable, else the default route's, else the first up
// physical-looking interface with an IPv4 address. Empty when there is none.
std::string choose_socket_interface(const RdmaInventory& inventory, const std::string& preferred) {
  if (!preferred.empty() && usable_for_sockets(inventory.find_interface(preferred))) return preferred;
  if (usable_for_sockets(inventory.find_interface(inventory.default_route_interface)))
    return inventory.default_route_interface;
  for (const NetInterface& interface : inventory.interfaces)
    if (usable_for_sockets(&interface) && !interface.ipv4.empty() && !virtual_interface(interface.name))
      return interface.name;
  return "";
}

// "bus:device.function" of a PCI address "domain:bus:device.function".
std::string pci_function(const std::string& address) {
  const size_t colon = address.find(':');
  return colon == std::string::npos ? "" : address.substr(colon + 1);
}
std::string pci_domain(const std::string& address) {
  return address.substr(0, address.find(':'));
}

const RdmaPort* find_port(const RdmaDevice& device, int number) {
  for (const RdmaPort& port : device.ports)
    if (port.number == number) return &port;
  return nullptr;
}

// NCCL_IB_HCA for the chosen ports: names, with `:port` for multi-port devices; prefixed with '=' when a
// plain prefix would also catch a port that was not chosen (mlx5_1 matches mlx5_10 and mlx5_11).
std::string hca_list(const RdmaInventory& inventory, const std::vector<NcclDataPort>& ports) {
  std::vector<std::string> entries;
  for (const NcclDataPort& port : ports) {
    const auto device = std::find_if(inventory.devices.begin(), inventory.devices.end(),
                                     [&](const RdmaDevice& d) { return d.name == port.device; });
    entries.push_back(device->ports.size() > 1 ? fmt::format("{}:{}", port.device, port.port) : port.device);
  }
  const std::string plain = absl::StrJoin(entries, ",");
  for (const RdmaDevice& device : inventory.devices) {
    for (const RdmaPort& port : device.ports) {
      const bool chosen = std::any_of(ports.begin(), ports.end(), [&](const NcclDataPort& p) {
        return p.device == device.name && p.port == port.number;
      });
      if (!chosen && nccl_list_matches(plain, device.name, port.number)) return "=" + plain;
    }
  }
  return plain;
}

std::string gbps(double rate) {
  return fmt::format("{:g} Gb/s", rate);
}

void add_port_warnings(const RdmaInventory& inventory, LinkLayer data_layer, NcclAdvice& advice) {
  double fastest = 0;
  for (const NcclDataPort& port : advice.data_ports)
    fastest = std::max(fastest, port.rate_gbps);
  for (const NcclDataPort& port : advice.data_ports) {
    const std::string subject = port_subject(port.device, port.port);
    const RdmaDevice& device = *std::find_if(inventory.devices.begin(), inventory.devices.end(),
                                             [&](const RdmaDevice& d) { return d.name == port.device; });
    const RdmaDevice* sibling = split_port_sibling(inventory, device);
    if (port.link_layer == LinkLayer::kEthernet) {
      const NetInterface* netdev = inventory.find_interface(port.netdev);
      const RdmaPort& rdma_port = *find_port(device, port.port);
      if (netdev != nullptr && netdev->mtu > 0 && netdev->mtu < kJumboMtuBytes) {
        advice.warnings.push_back(
            {WarningKind::kMtuBelow9000, subject,
             fmt::format("{} has MTU {} (RDMA MTU {}): RoCE wants jumbo frames. Set MTU {} on both ends: "
                         "`sudo ip link set {} mtu {}` (and in netplan so it survives a reboot)",
                         port.netdev, netdev->mtu, rdma_port.active_mtu_bytes, kJumboMtuBytes, port.netdev,
                         kJumboMtuBytes)});
      } else if ((netdev == nullptr || netdev->mtu == 0) && rdma_port.active_mtu_bytes > 0 &&
                 rdma_port.active_mtu_bytes < kLargestRdmaMtuBytes) {
        advice.warnings.push_back(
            {WarningKind::kMtuBelow9000, subject,
             fmt::format("RDMA MTU is {} bytes, so the netdev's MTU is below {}: set MTU {} on its interface",
                         rdma_port.active_mtu_bytes, kJumboMtuBytes, kJumboMtuBytes)});
      }
    }
    if (port.rate_gbps > 0 && port.rate_gbps < kSlowLinkGbps) {
      advice.warnings.push_back(
          {WarningKind::kSlowLink, subject,
           fmt::format("links at {}: well below the 200-400 Gb/s of a Spark's ConnectX-7 or an H100 node's "
                       "NDR HCA; all-reduce will be network-bound. Check the cable and the switch port",
                       gbps(port.rate_gbps))});
    } else if (sibling != nullptr && port.rate_gbps > 0 && port.rate_gbps < kSparkHalfGbps) {
      advice.warnings.push_back(
          {WarningKind::kSlowLink, subject,
           fmt::format("links at {}; a DGX Spark's ConnectX-7 links at {} with an approved QSFP112 cable "
                       "(a QSFP28/QSFP56 cable gives less, and often brings up only one of the two devices)",
                       gbps(port.rate_gbps), gbps(kSparkHalfGbps))});
    }
    if (port.rate_gbps > 0 && port.rate_gbps < fastest) {
      advice.warnings.push_back(
          {WarningKind::kSpeedMismatch, subject,
           fmt::format("links at {} while the fastest data port links at {}: NCCL's rings run at the pace "
                       "of the slowest rail",
                       gbps(port.rate_gbps), gbps(fastest))});
    }
    if (sibling != nullptr) {
      const RdmaPort* sibling_port = find_port(*sibling, port.port);
      if (sibling_port == nullptr || sibling_port->state != PortState::kActive) {
        advice.warnings.push_back(
            {WarningKind::kHalfPortActive, subject,
             fmt::format("only one of this QSFP port's two devices is active: {} is up, {} is {}. A DGX "
                         "Spark's port is two PCIe x4 halves of ~100 Gb/s each and NCCL needs both "
                         "(NCCL_IB_HCA={},{}): expect half the bandwidth. Reseat or replace the cable "
                         "(QSFP112), bring up {} and give it an address",
                         port.device, sibling->name,
                         sibling_port == nullptr ? "missing" : to_string(sibling_port->state), port.device,
                         sibling->name, sibling_port == nullptr ? sibling->name : sibling_port->netdev)});
      }
    }
  }
  // Ports of the data fabric that are down: a missing rail, unless the port is a whole split pair that is
  // simply not cabled (a Spark's second QSFP cage), or the half of an active pair (warned about above).
  for (const RdmaDevice& device : inventory.devices) {
    for (const RdmaPort& port : device.ports) {
      if (port.state == PortState::kActive) continue;
      const std::string subject = port_subject(device.name, port.number);
      const RdmaDevice* sibling = split_port_sibling(inventory, device);
      const RdmaPort* sibling_port = sibling == nullptr ? nullptr : find_port(*sibling, port.number);
      if (sibling_port != nullptr && sibling_port->state == PortState::kActive) continue;
      if (port.link_layer != data_layer) {
        advice.notes.push_back(fmt::format("{} ({}) is {}: not part of the data fabric, ignored", subject,
                                           to_string(port.link_layer), to_string(port.state)));
      } else if (sibling_port != nullptr) {
        if (&device < sibling) {  // once per pair, from the one listed first
          advice.notes.push_back(fmt::format("{} and {} (one QSFP port) are both {}: that port is not cabled",
                                             subject, port_subject(sibling->name, port.number),
                                             to_string(port.state)));
        }
      } else {
        advice.warnings.push_back(
            {WarningKind::kPortDown, subject,
             fmt::format("is {} (physical state {}) while other {} ports are up: NCCL will use one rail "
                         "fewer. Check the cable, `ibstat {}`, and the switch",
                         to_string(port.state), port.physical_state.empty() ? "?" : port.physical_state,
                         to_string(port.link_layer), device.name)});
      }
    }
  }
}

void add_gid_settings(NcclAdvice& advice) {
  std::vector<int> indices;
  bool any_v1 = false;
  for (const NcclDataPort& port : advice.data_ports) {
    if (std::find(indices.begin(), indices.end(), port.gid_index) == indices.end())
      indices.push_back(port.gid_index);
    any_v1 |= port.gid_type == GidType::kRoceV1;
  }
  if (indices.size() == 1 && indices[0] >= 0) {
    advice.settings.push_back({"NCCL_IB_GID_INDEX", std::to_string(indices[0]),
                               fmt::format("the RoCE {} GID{} on every chosen port", any_v1 ? "v1" : "v2",
                                           any_v1 ? "" : " (IPv4 where there is one)")});
  } else if (indices.size() > 1) {
    std::vector<std::string> where;
    for (const NcclDataPort& port : advice.data_ports)
      where.push_back(fmt::format("{}:{} index {}", port.device, port.port, port.gid_index));
    advice.warnings.push_back(
        {WarningKind::kGidIndexDiffers, "NCCL_IB_GID_INDEX",
         fmt::format("the GID to use sits at different indices on different ports ({}); NCCL_IB_GID_INDEX is "
                     "one number for all, so it is left unset and NCCL picks per port",
                     absl::StrJoin(where, ", "))});
  }
  if (any_v1) {
    advice.settings.push_back({"NCCL_IB_ROCE_VERSION_NUM", "1",
                               "only RoCE v1 GIDs exist; NCCL defaults to v2 and would find no GID"});
  }
}

void choose_rdma_ports(const RdmaInventory& inventory, NcclAdvice& advice, LinkLayer& data_layer) {
  bool any_infiniband = false;
  for (const RdmaDevice& device : inventory.devices)
    for (const RdmaPort& port : device.ports)
      any_infiniband |= port.state == PortState::kActive && port.link_layer == LinkLayer::kInfiniBand;
  data_layer = any_infiniband ? LinkLayer::kInfiniBand : LinkLayer::kEthernet;
  for (const RdmaDevice& device : inventory.devices) {
    for (const RdmaPort& port : device.ports) {
      if (port.state != PortState::kActive) continue;
      if (port.link_layer != data_layer) {
        advice.notes.push_back(fmt::format(
            "{} is an active {} port on a node with an InfiniBand fabric: left out of NCCL_IB_HCA (storage "
            "or front-end network)",
            port_subject(device.name, port.number), to_string(port.link_layer)));
        continue;
      }
      NcclDataPort data_port;
      data_port.device = device.name;
      data_port.port = port.number;
      data_port.link_layer = port.link_layer;
      data_port.rate_gbps = port.rate_gbps();
      data_port.netdev = port.netdev;
      if (port.link_layer == LinkLayer::kEthernet) {
        const RdmaGid* gid = choose_gid(port);
        if (gid == nullptr) {
          advice.warnings.push_back({WarningKind::kNoRoceV2Gid, port_subject(device.name, port.number),
                                     "has an empty GID table: RoCE cannot address it. Is its netdev up?"});
          continue;
        }
        data_port.gid_index = gid->index;
        data_port.gid_type = gid->type;
        if (!gid->netdev.empty()) data_port.netdev = gid->netdev;
        if (gid->type != GidType::kRoceV2) {
          advice.warnings.push_back(
              {WarningKind::kNoRoceV2Gid, port_subject(device.name, port.number),
               fmt::format(
                   "has only RoCE v1 GIDs: v1 is not routable (one L2 segment only) and NCCL defaults "
                   "to v2. Using GID {} with NCCL_IB_ROCE_VERSION_NUM=1; better enable RoCE v2 (the "
                   "default of ConnectX-4 and later with current drivers and firmware)",
                   gid->index)});
        }
        if (!gid_carries_ipv4(gid->gid)) {
          advice.warnings.push_back(
              {WarningKind::kNoIpv4Gid, port_subject(device.name, port.number),
               fmt::format("no GID carries an IPv4 address: {} has no IPv4 address. Give it one (a /24 per "
                           "Spark half, e.g. 192.168.100.x and 192.168.101.x); using link-local GID {}",
                           data_port.netdev.empty() ? "its netdev" : data_port.netdev, gid->index)});
        }
      }
      advice.data_ports.push_back(data_port);
    }
  }
}

}  // namespace

const char* to_string(NcclTransport transport) {
  switch (transport) {
    case NcclTransport::kInfiniBand:
      return "InfiniBand";
    case NcclTransport::kRoce:
      return "RoCE";
    case NcclTransport::kSocket:
      return "socket";
  }
  return "?";
}

const char* to_string(WarningKind kind) {
  switch (kind) {
    case WarningKind::kNoActivePort:
      return "no_active_port";
    case WarningKind::kPortDown:
      return "port_down";
    case WarningKind::kHalfPortActive:
      return "half_port_active";
    case WarningKind::kMtuBelow9000:
      return "mtu_below_9000";
    case WarningKind::kSlowLink:
      return "slow_link";
    case WarningKind::kSpeedMismatch:
      return "speed_mismatch";
    case WarningKind::kNoRoceV2Gid:
      return "no_roce_v2_gid";
    case WarningKind::kNoIpv4Gid:
      return "no_ipv4_gid";
    case WarningKind::kGidIndexDiffers:
      return "gid_index_differs";
    case WarningKind::kNoSocketInterface:
      return "no_socket_interface";
    case WarningKind::kUserSetting:
      return "user_setting";
  }
  return "?";
}

const NcclSetting* NcclAdvice::find(const std::string& name) const {
  for (const NcclSetting& setting : settings)
    if (setting.name == name) return &setting;
  return nullptr;
}

bool NcclAdvice::has_warning(WarningKind kind) const {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const DoctorWarning& w) { return w.kind == kind; });
}

double NcclAdvice::total_rate_gbps() const {
  double total = 0;
  for (const NcclDataPort& port : data_ports)
    total += port.rate_gbps;
  return total;
}

const RdmaDevice* split_port_sibling(const RdmaInventory& inventory, const RdmaDevice& device) {
  if (device.pci_address.empty()) return nullptr;
  for (const RdmaDevice& other : inventory.devices) {
    if (&other == &device || other.pci_address.empty()) continue;
    if (pci_function(other.pci_address) == pci_function(device.pci_address) &&
        pci_domain(other.pci_address) != pci_domain(device.pci_address) &&
        other.vendor_part_id == device.vendor_part_id)
      return &other;
  }
  return nullptr;
}

bool nccl_list_matches(const std::string& list, const std::string& name, int port) {
  absl::string_view entries = list;
  const bool exclude = !entries.empty() && entries.front() == '^';
  if (exclude) entries.remove_prefix(1);
  const bool exact = !entries.empty() && entries.front() == '=';
  if (exact) entries.remove_prefix(1);
  bool matched = entries.empty();  // NCCL: an empty list matches everything
  for (absl::string_view entry : absl::StrSplit(entries, ',', absl::SkipEmpty())) {
    const size_t colon = entry.find(':');
    const absl::string_view prefix = entry.substr(0, colon);
    int entry_port = -1;
    if (colon != absl::string_view::npos && !absl::SimpleAtoi(entry.substr(colon + 1), &entry_port))
      entry_port = -1;
    const bool name_matches =
        exact ? name == prefix : absl::string_view(name).substr(0, prefix.size()) == prefix;
    const bool port_matches = entry_port == -1 || port == -1 || entry_port == port;
    if (name_matches && port_matches) {
      matched = true;
      break;
    }
  }
  return matched != exclude;
}

NcclAdvice advise_nccl(const RdmaInventory& inventory) {
  NcclAdvice advice;
  LinkLayer data_layer = LinkLayer::kEthernet;
  choose_rdma_ports(inventory, advice, data_layer);
  std::string preferred_interface;
  if (!advice.data_ports.empty()) {
    advice.transport =
        data_layer == LinkLayer::kInfiniBand ? NcclTransport::kInfiniBand : NcclTransport::kRoce;
    // Whether a chosen port's split-port twin is chosen too (a Spark QSFP port with both halves up).
    const bool split =
        std::any_of(advice.data_ports.begin(), advice.data_ports.end(), [&](const NcclDataPort& port) {
          for (const RdmaDevice& device : inventory.devices) {
            const RdmaDevice* sibling =
                device.name == port.device ? split_port_sibling(inventory, device) : nullptr;
            if (sibling == nullptr) continue;
            for (const NcclDataPort& other : advice.data_ports)
              if (other.device == sibling->name) return true;
          }
          return false;
        });
    advice.settings.push_back(
        {"NCCL_IB_HCA", hca_list(inventory, advice.data_ports),
         fmt::format("every active {} port{}",
                     to_string(data_layer == LinkLayer::kInfiniBand ? NcclTransport::kInfiniBand
                                                                    : NcclTransport::kRoce),
                     split ? " (both devices of a Spark QSFP port)" : "")});
    if (advice.transport == NcclTransport::kRoce) {
      add_gid_settings(advice);
      preferred_interface = advice.data_ports.front().netdev;
    }
    add_port_warnings(inventory, data_layer, advice);
  } else {
    if (inventory.devices.empty()) {
      advice.notes.emplace_back(
          "no RDMA device: NCCL will use its socket transport (TCP) between machines; within one machine "
          "GPUs still talk over NVLink/PCIe. Fine for one node, slow across nodes");
    } else {
      std::vector<std::string> ports;
      for (const RdmaDevice& device : inventory.devices)
        for (const RdmaPort& port : device.ports)
          ports.push_back(
              fmt::format("{} {}", port_subject(device.name, port.number), to_string(port.state)));
      advice.warnings.push_back(
          {WarningKind::kNoActivePort, "RDMA",
           fmt::format("RDMA devices are present but no port is active ({}): NCCL falls back to sockets, "
                       "far slower across machines. Check the cables and `ibdev2netdev`; on a Spark use the "
                       "same QSFP cage on both machines",
                       absl::StrJoin(ports, ", "))});
    }
    advice.settings.push_back({"NCCL_IB_DISABLE", "1", "no active RDMA port: use the socket transport"});
  }
  const std::string socket_interface = choose_socket_interface(inventory, preferred_interface);
  if (!socket_interface.empty()) {
    advice.settings.push_back({"NCCL_SOCKET_IFNAME", socket_interface,
                               socket_interface == preferred_interface
                                   ? "the RoCE netdev: bootstrap over the link the machines share"
                                   : (advice.transport == NcclTransport::kSocket
                                          ? "the default route's interface: NCCL's data path"
                                          : "the default route's interface, for bootstrap")});
  } else {
    advice.warnings.push_back(
        {WarningKind::kNoSocketInterface, "NCCL_SOCKET_IFNAME",
         "no network interface is up with an address: NCCL can run on this machine alone, but cannot reach "
         "other machines"});
  }
  return advice;
}

}  // namespace nanoforge
