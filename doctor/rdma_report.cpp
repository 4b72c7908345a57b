// format_rdma_report / format_nccl_settings: the networking part of `nanoforge doctor`'s output.
#include "doctor/rdma_report.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>

namespace nanoforge {
namespace {

const char* gid_type_label(GidType type) {
  switch (type) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      return "?";
  }
  return "?";
}

const NcclDataPort* data_port_of(const NcclAdvice& advice, const std::string& device, int port) {
  for (const NcclDataPort& data_port : advice.data_ports)
    if (data_port.device == device && data_port.port == port) return &data_port;
  return nullptr;
}

std::string interface_summary(const RdmaInventory& inventory, const std::string& name) {
  if (name.empty()) return "no netdev";
  const NetInterface* interface = inventory.find_interface(name);
  if (interface == nullptr) return "netdev " + name;
  std::string summary =
      fmt::format("netdev {} {} mtu {}", name, interface->up ? "up" : "down", interface->mtu);
  if (!interface->ipv4.empty()) absl::StrAppend(&summary, " ", absl::StrJoin(interface->ipv4, ","));
  return summary;
}

void append_port(const RdmaInventory& inventory, const NcclAdvice& advice, const RdmaDevice& device,
                 const RdmaPort& port, std::string& text) {
  // A port that is not up reports a meaningless minimum rate (1X SDR): leave it out.
  const std::string rate = port.state != PortState::kActive ? "no link"
                           : port.rate_gbps() > 0 ? fmt::format("{:g} Gb/s ({}X {})", port.rate_gbps(),
                                                                port.width_lanes, port.speed_name)
                                                  : "rate unknown";
  const std::string layer =
      port.link_layer == LinkLayer::kEthernet ? "Ethernet (RoCE)" : to_string(port.link_layer);
  text += fmt::format("    port {}: {}{}  {}  {}  MTU {} (max {})  {}\n", port.number, to_string(port.state),
                      port.physical_state.empty() ? "" : " (" + port.physical_state + ")", layer, rate,
                      port.active_mtu_bytes, port.max_mtu_bytes, interface_summary(inventory, port.netdev));
  const NcclDataPort* chosen = data_port_of(advice, device.name, port.number);
  for (const RdmaGid& gid : port.gids) {
    const bool marked = chosen != nullptr && chosen->gid_index == gid.index;
    text += fmt::format("      GID {:<3} {:<28} {:<8} {}{}\n", gid.index, readable_gid(gid.gid),
                        gid_type_label(gid.type), gid.netdev, marked ? "  <- NCCL" : "");
  }
}

}  // namespace

std::string adapter_name(int vendor_part_id) {
  switch (vendor_part_id) {
    case 4115:
      return "ConnectX-4";
    case 4117:
      return "ConnectX-4 Lx";
    case 4119:
      return "ConnectX-5";
    case 4121:
      return "ConnectX-5 Ex";
    case 4123:
      return "ConnectX-6";
    case 4125:
      return "ConnectX-6 Dx";
    case 4127:
      return "ConnectX-6 Lx";
    case 4129:
      return "ConnectX-7";
    case 4131:
      return "ConnectX-8";
    case 41686:
      return "BlueField-2";
    case 41692:
      return "BlueField-3";
    default:
      return "";
  }
}

std::string readable_gid(const std::string& sysfs_gid) {
  unsigned char bytes[16];
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET6, sysfs_gid.c_str(), bytes) != 1 ||
      inet_ntop(AF_INET6, bytes, text, sizeof text) == nullptr)
    return sysfs_gid;
  return text;
}

std::string shell_quoted(const std::string& value) {
  const bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_.,:/-").find(c) != std::string_view::npos;
  });
  if (plain) return value;
  std::string quoted = "'";
  for (char c : value)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string format_rdma_report(const RdmaInventory& inventory, const NcclAdvice& advice) {
  std::string text = fmt::format("RDMA devices (libibverbs): {}{}\n", inventory.devices.size(),
                                 inventory.description.empty() ? "" : " on " + inventory.description);
  if (inventory.devices.empty()) {
    for (const std::string& note : inventory.notes)
      text += "  " + note + "\n";
  }
  for (const RdmaDevice& device : inventory.devices) {
    const std::string adapter = adapter_name(device.vendor_part_id);
    text += fmt::format(
        "  {}{}{}{}\n", device.name, device.pci_address.empty() ? "" : "  pci " + device.pci_address,
        adapter.empty() ? "" : "  " + adapter, device.firmware.empty() ? "" : "  fw " + device.firmware);
    for (const RdmaPort& port : device.ports)
      append_port(inventory, advice, device, port, text);
  }
  if (!inventory.devices.empty()) {
    for (const std::string& note : inventory.notes)
      text += "  note: " + note + "\n";
  }

  std::vector<std::string> ports;
  bool split = false;
  for (const NcclDataPort& port : advice.data_ports) {
    ports.push_back(fmt::format("{}:{}", port.device, port.port));
    for (const RdmaDevice& device : inventory.devices)
      if (device.name == port.device) split |= split_port_sibling(inventory, device) != nullptr;
  }
  if (advice.transport == NcclTransport::kSocket) {
    const NcclSetting* interface = advice.find("NCCL_SOCKET_IFNAME");
    text += fmt::format("NCCL transport: sockets (TCP){} — no active RDMA port\n",
                        interface == nullptr ? "" : " over " + interface->value);
  } else {
    const bool same_rate = std::all_of(
        advice.data_ports.begin(), advice.data_ports.end(),
        [&](const NcclDataPort& p) { return p.rate_gbps == advice.data_ports.front().rate_gbps; });
    const std::string links =
        same_rate ? fmt::format("{} x {:g} Gb/s", ports.size(), advice.data_ports.front().rate_gbps)
                  : fmt::format("{:g} Gb/s in all", advice.total_rate_gbps());
    text += fmt::format("NCCL transport: {} over {} port{} ({}): {} links\n", to_string(advice.transport),
                        ports.size(), ports.size() == 1 ? "" : "s", absl::StrJoin(ports, ", "), links);
    if (split) {
      text +=
          "  DGX Spark: each QSFP port is two devices on PCIe Gen5 x4 (~100 Gb/s each). With both in use, "
          "expect "
          "nccl-tests all_gather busbw 20-24 GB/s; ~3 GB/s means one half, a small MTU or a non-release "
          "NCCL\n";
    }
  }
  if (!advice.warnings.empty()) {
    text += fmt::format("warnings ({}):\n", advice.warnings.size());
    for (const DoctorWarning& warning : advice.warnings)
      text += fmt::format("  ! [{}] {}: {}\n", to_string(warning.kind), warning.subject, warning.message);
  }
  if (!advice.notes.empty()) text += "notes:\n";
  for (const std::string& note : advice.notes)
    text += "  - " + note + "\n";
  return text;
}

std::string format_nccl_settings(const NcclAdvice& advice, const EnvReview& review) {
  std::string text = "NCCL settings for this machine:\n";
  size_t width = 0;
  for (const NcclSetting& setting : advice.settings)
    width = std::max(width, setting.name.size() + setting.value.size() + 1);
  for (const NcclSetting& setting : advice.settings)
    text += fmt::format("  {:<{}}  {}\n", setting.name + "=" + setting.value, width, setting.reason);
  std::vector<const EnvDecision*> kept, exported;
  for (const EnvDecision& decision : review.decisions)
    (decision.exported() ? exported : kept).push_back(&decision);
  std::erase_if(kept, [](const EnvDecision* decision) { return !decision->user_value; });
  if (!kept.empty()) {
    text += "already set in your environment (kept):\n";
    for (const EnvDecision* decision : kept) {
      std::string comparison;
      if (decision->advised.empty()) {
        comparison = "  (doctor sets nothing for it here)";
      } else if (decision->advised != *decision->user_value) {
        comparison = fmt::format("  (doctor would choose {})", decision->advised);
      } else {
        comparison = "  (same as doctor's choice)";
      }
      text += fmt::format("  {}={}{}\n", decision->name, *decision->user_value, comparison);
    }
  }
  for (const DoctorWarning& warning : review.warnings)
    text += fmt::format("  ! [{}] {}: {}\n", to_string(warning.kind), warning.subject, warning.message);
  for (const std::string& problem : review.problems)
    text += fmt::format("  PROBLEM: {}\n", problem);
  if (exported.empty()) {
    text += "nothing to export: every setting is already in your environment\n";
  } else {
    text += "to apply them (paste, or: eval \"$(nanoforge doctor | grep '^export ')\"):\n";
    for (const EnvDecision* decision : exported)
      text += fmt::format("export {}={}\n", decision->name, shell_quoted(decision->advised));
  }
  return text;
}

}  // namespace nanoforge
