// add_verbs_devices: libibverbs for devices, ports and GID values; sysfs for what verbs does not say in this
// rdma-core (GID type strings, GID network devices, PCI address). Built only where libibverbs is found.
#include "doctor/rdma_verbs.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "doctor/sysfs.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

std::string speed_name_of(uint8_t active_speed) {
  switch (active_speed) {
    case 1:
      return "SDR";
    case 2:
      return "DDR";
    case 4:
      return "QDR";
    case 8:
      return "FDR10";
    case 16:
      return "FDR";
    case 32:
      return "EDR";
    case 64:
      return "HDR";
    case 128:
      return "NDR";
    default:
      return "";  // XDR needs active_speed_ex, which this rdma-core does not have
  }
}

int lanes_of(uint8_t active_width) {
  switch (active_width) {
    case 1:
      return 1;
    case 2:
      return 4;
    case 4:
      return 8;
    case 8:
      return 12;
    case 16:
      return 2;
    default:
      return 0;
  }
}

std::string physical_state_name(uint8_t physical_state) {
  static const char* const kNames[] = {
      "NoChange",          "Sleep",  "Polling", "Disabled", "PortConfigurationTraining", "LinkUp",
      "LinkErrorRecovery", "PhyTest"};
  return physical_state < std::size(kNames) ? kNames[physical_state] : fmt::format("state{}", physical_state);
}

PortState port_state_of(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return PortState::kDown;
    case IBV_PORT_INIT:
      return PortState::kInit;
    case IBV_PORT_ARMED:
      return PortState::kArmed;
    case IBV_PORT_ACTIVE:
    case IBV_PORT_ACTIVE_DEFER:
      return PortState::kActive;
    default:
      return PortState::kUnknown;
  }
}

// "fe80:0000:0000:0000:3e6d:66ff:fecc:b3b6", the way sysfs prints a GID.
std::string sysfs_gid_text(const ibv_gid& gid) {
  std::string text;
  for (int group = 0; group < 8; ++group)
    text += fmt::format("{}{:02x}{:02x}", group ? ":" : "", gid.raw[2 * group], gid.raw[2 * group + 1]);
  return text;
}

GidType gid_type_of(const std::string& sysfs_type, LinkLayer link_layer) {
  if (link_layer == LinkLayer::kInfiniBand) return GidType::kIb;
  if (sysfs_type == "RoCE v2") return GidType::kRoceV2;
  if (sysfs_type == "IB/RoCE v1") return GidType::kRoceV1;
  return GidType::kUnknown;
}

std::vector<RdmaGid> read_gids(ibv_context* context, const fs::path& port_dir, int port_number,
                               int table_length, LinkLayer link_layer) {
  std::vector<RdmaGid> gids;
  for (int index = 0; index < table_length; ++index) {
    ibv_gid gid;
    if (ibv_query_gid(context, static_cast<uint8_t>(port_number), index, &gid) != 0) continue;
    if (std::all_of(std::begin(gid.raw), std::end(gid.raw), [](uint8_t byte) { return byte == 0; })) continue;
    RdmaGid entry;
    entry.index = index;
    entry.gid = sysfs_gid_text(gid);
    const std::string name = std::to_string(index);
    entry.type = gid_type_of(read_sysfs_line(port_dir / "gid_attrs" / "types" / name), link_layer);
    entry.netdev = read_sysfs_line(port_dir / "gid_attrs" / "ndevs" / name);
    if (entry.type == GidType::kUnknown) {  // sysfs unreadable: ask verbs (rdma-core >= 32)
      ibv_gid_entry verbs_entry;
      if (ibv_query_gid_ex(context, port_number, index, &verbs_entry, 0) == 0) {
        entry.type = verbs_entry.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
                     : verbs_entry.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                                    : GidType::kIb;
        char name_buffer[IF_NAMESIZE] = {};
        if (entry.netdev.empty() && verbs_entry.ndev_ifindex != 0 &&
            if_indextoname(verbs_entry.ndev_ifindex, name_buffer) != nullptr)
          entry.netdev = name_buffer;
      }
    }
    gids.push_back(entry);
  }
  return gids;
}

// The network device of a port: that of its GIDs, else the device's only netdev, else the one whose
// dev_port matches (multi-port devices list one netdev per port under device/net/).
std::string port_netdev(const fs::path& device_dir, const RdmaPort& port) {
  for (const RdmaGid& gid : port.gids)
    if (!gid.netdev.empty()) return gid.netdev;
  std::error_code error;
  std::vector<fs::path> netdevs;
  for (const fs::directory_entry& entry : fs::directory_iterator(device_dir / "device" / "net", error))
    netdevs.push_back(entry.path());
  if (netdevs.size() == 1) return netdevs[0].filename().string();
  for (const fs::path& netdev : netdevs)
    if (read_sysfs_line(netdev / "dev_port") == std::to_string(port.number - 1))
      return netdev.filename().string();
  return "";
}

absl::StatusOr<RdmaDevice> read_device(ibv_device* verbs_device) {
  RdmaDevice device;
  device.name = ibv_get_device_name(verbs_device);
  const fs::path device_dir = verbs_device->ibdev_path;
  std::error_code error;
  const fs::path pci = fs::canonical(device_dir / "device", error).filename();
  if (!error && std::count(pci.string().begin(), pci.string().end(), ':') == 2)
    device.pci_address = pci.string();

  ibv_context* context = ibv_open_device(verbs_device);
  if (context == nullptr) {
    return absl::PermissionDeniedError(
        fmt::format("cannot open RDMA device {}: {} (check the permissions of /dev/infiniband/uverbs*)",
                    device.name, std::strerror(errno)));
  }
  ibv_device_attr attributes;
  if (ibv_query_device(context, &attributes) == 0) {
    device.firmware = attributes.fw_ver;
    device.vendor_part_id = static_cast<int>(attributes.vendor_part_id);
    for (int number = 1; number <= attributes.phys_port_cnt; ++number) {
      ibv_port_attr port_attributes;
      if (ibv_query_port(context, static_cast<uint8_t>(number), &port_attributes) != 0) continue;
      RdmaPort port;
      port.number = number;
      port.state = port_state_of(port_attributes.state);
      port.physical_state = physical_state_name(port_attributes.phys_state);
      port.link_layer = port_attributes.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::kEthernet
                        : port_attributes.link_layer == IBV_LINK_LAYER_INFINIBAND ||
                                port_attributes.link_layer == IBV_LINK_LAYER_UNSPECIFIED
                            ? LinkLayer::kInfiniBand
                            : LinkLayer::kUnknown;
      port.active_mtu_bytes = mtu_enum_to_bytes(port_attributes.active_mtu);
      port.max_mtu_bytes = mtu_enum_to_bytes(port_attributes.max_mtu);
      port.width_lanes = lanes_of(port_attributes.active_width);
      port.speed_name = speed_name_of(port_attributes.active_speed);
      port.gids = read_gids(context, device_dir / "ports" / std::to_string(number), number,
                            port_attributes.gid_tbl_len, port.link_layer);
      port.netdev = port_netdev(device_dir, port);
      device.ports.push_back(port);
    }
  }
  ibv_close_device(context);
  return device;
}

// Why libibverbs lists no device, from what the kernel exposes.
const char* no_device_reason(int list_errno) {
  if (!fs::exists("/sys/class/infiniband"))
    return "no RDMA driver is loaded (/sys/class/infiniband does not exist): no ConnectX/RDMA NIC, or its "
           "driver (mlx5_ib) is not loaded";
  if (list_errno == ENOSYS || !fs::exists("/sys/class/infiniband_verbs"))
    return "RDMA devices exist in /sys/class/infiniband but the verbs interface is missing: load ib_uverbs "
           "(modprobe ib_uverbs)";
  return "libibverbs lists no device although the kernel has RDMA devices: is rdma-core's provider for this "
         "NIC (e.g. libmlx5) installed?";
}

}  // namespace

void add_verbs_devices(RdmaInventory& inventory) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  const int list_errno = errno;
  if (list == nullptr || count == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    inventory.notes.emplace_back(no_device_reason(list == nullptr ? list_errno : 0));
    return;
  }
  for (int n = 0; n < count; ++n) {
    absl::StatusOr<RdmaDevice> device = read_device(list[n]);
    if (device.ok()) {
      inventory.devices.push_back(*std::move(device));
    } else {
      inventory.notes.push_back(std::string(device.status().message()));
    }
  }
  ibv_free_device_list(list);
}

}  // namespace nanoforge
