// The RDMA inventory's names and rates, and its recorded text format (parse and format round-trip).
#include "doctor/rdma_inventory.h"

#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

namespace nanoforge {
namespace {

// Per-lane data rates in Gb/s, as the Linux kernel's ib_speed_enum_to_int / sysfs "rate" use them.
struct SpeedRate {
  const char* name;
  double lane_gbps;
};
constexpr SpeedRate kSpeedRates[] = {{"SDR", 2.5}, {"DDR", 5},  {"QDR", 10},  {"FDR10", 10}, {"FDR", 14},
                                     {"EDR", 25},  {"HDR", 50}, {"NDR", 100}, {"XDR", 200}};

struct Named {
  const char* name;
  int value;
};
constexpr Named kPortStates[] = {{"DOWN", static_cast<int>(PortState::kDown)},
                                 {"INIT", static_cast<int>(PortState::kInit)},
                                 {"ARMED", static_cast<int>(PortState::kArmed)},
                                 {"ACTIVE", static_cast<int>(PortState::kActive)},
                                 {"UNKNOWN", static_cast<int>(PortState::kUnknown)}};
constexpr Named kLinkLayers[] = {{"InfiniBand", static_cast<int>(LinkLayer::kInfiniBand)},
                                 {"Ethernet", static_cast<int>(LinkLayer::kEthernet)},
                                 {"Unknown", static_cast<int>(LinkLayer::kUnknown)}};
constexpr Named kGidTypes[] = {{"IB", static_cast<int>(GidType::kIb)},
                               {"RoCEv1", static_cast<int>(GidType::kRoceV1)},
                               {"RoCEv2", static_cast<int>(GidType::kRoceV2)},
                               {"unknown", static_cast<int>(GidType::kUnknown)}};

template <size_t N>
const char* name_of(const Named (&table)[N], int value) {
  for (const Named& entry : table)
    if (entry.value == value) return entry.name;
  return "?";
}

template <size_t N>
bool value_of(const Named (&table)[N], const std::string& name, int& value) {
  for (const Named& entry : table) {
    if (name == entry.name) {
      value = entry.value;
      return true;
    }
  }
  return false;
}

// One line of the recorded format: the record kind, its positional words and its key=value fields (keys may
// repeat, e.g. several ipv4=).
struct Record {
  std::string kind;
  std::vector<std::string> words;
  std::multimap<std::string, std::string> fields;

  std::string field(const std::string& key, const std::string& fallback = "") const {
    auto found = fields.find(key);
    return found == fields.end() ? fallback : found->second;
  }
};

Record split_record(const std::string& line) {
  Record record;
  for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
    const std::string word(token);
    if (record.kind.empty()) {
      record.kind = word;
    } else if (const size_t equals = word.find('='); equals != std::string::npos) {
      record.fields.emplace(word.substr(0, equals), word.substr(equals + 1));
    } else {
      record.words.push_back(word);
    }
  }
  return record;
}

absl::Status line_error(int line_number, const std::string& line, const std::string& what) {
  return absl::InvalidArgumentError(
      fmt::format("RDMA inventory line {}: {} (line: '{}'); see doctor/rdma_inventory.h for the format",
                  line_number, what, line));
}

bool parse_int(const std::string& text, int& value) {
  return absl::SimpleAtoi(text, &value);
}

}  // namespace

double RdmaPort::rate_gbps() const {
  return width_lanes * lane_rate_gbps(speed_name);
}

const NetInterface* RdmaInventory::find_interface(const std::string& name) const {
  for (const NetInterface& interface : interfaces)
    if (interface.name == name) return &interface;
  return nullptr;
}

double lane_rate_gbps(const std::string& speed_name) {
  for (const SpeedRate& rate : kSpeedRates)
    if (speed_name == rate.name) return rate.lane_gbps;
  return 0;
}

int mtu_enum_to_bytes(int ibv_mtu) {
  return ibv_mtu >= 1 && ibv_mtu <= 5 ? 128 << ibv_mtu : 0;
}

const char* to_string(PortState state) {
  return name_of(kPortStates, static_cast<int>(state));
}
const char* to_string(LinkLayer layer) {
  return name_of(kLinkLayers, static_cast<int>(layer));
}
const char* to_string(GidType type) {
  return name_of(kGidTypes, static_cast<int>(type));
}

absl::StatusOr<RdmaInventory> parse_rdma_inventory(const std::string& text) {
  RdmaInventory inventory;
  std::istringstream lines(text);
  std::string line;
  int line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const Record record = split_record(line);
    if (record.kind.empty()) continue;
    if (record.kind == "description" || record.kind == "note") {
      const size_t start = line.find(record.kind) + record.kind.size();
      const size_t first = line.find_first_not_of(' ', start);
      const std::string rest = first == std::string::npos ? "" : line.substr(first);
      if (record.kind == "note") {
        inventory.notes.push_back(rest);
      } else {
        inventory.description = rest;
      }
    } else if (record.kind == "device") {
      if (record.words.size() != 1)
        return line_error(line_number, line, "expected `device NAME key=value...`");
      RdmaDevice device;
      device.name = record.words[0];
      device.pci_address = record.field("pci");
      device.firmware = record.field("fw");
      if (!record.field("part").empty() && !parse_int(record.field("part"), device.vendor_part_id))
        return line_error(line_number, line, "part= is not a number");
      inventory.devices.push_back(device);
    } else if (record.kind == "port") {
      if (inventory.devices.empty()) return line_error(line_number, line, "`port` before any `device`");
      RdmaPort port;
      int state = 0, layer = 0;
      if (record.words.size() != 1 || !parse_int(record.words[0], port.number))
        return line_error(line_number, line, "expected `port NUMBER key=value...`");
      if (!value_of(kPortStates, record.field("state", "UNKNOWN"), state))
        return line_error(line_number, line, "state= must be DOWN, INIT, ARMED or ACTIVE");
      if (!value_of(kLinkLayers, record.field("link", "Unknown"), layer))
        return line_error(line_number, line, "link= must be InfiniBand or Ethernet");
      port.state = static_cast<PortState>(state);
      port.link_layer = static_cast<LinkLayer>(layer);
      port.physical_state = record.field("phys");
      if (!parse_int(record.field("mtu", "0"), port.active_mtu_bytes) ||
          !parse_int(record.field("max_mtu", "0"), port.max_mtu_bytes))
        return line_error(line_number, line, "mtu= and max_mtu= are byte counts");
      const std::string width = record.field("width", "0X");
      if (width.empty() || width.back() != 'X' ||
          !parse_int(width.substr(0, width.size() - 1), port.width_lanes))
        return line_error(line_number, line, "width= is a lane count such as 4X");
      port.speed_name = record.field("speed");
      if (!port.speed_name.empty() && lane_rate_gbps(port.speed_name) == 0)
        return line_error(line_number, line,
                          "speed= must be SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR or XDR");
      port.netdev = record.field("netdev");
      inventory.devices.back().ports.push_back(port);
    } else if (record.kind == "gid") {
      if (inventory.devices.empty() || inventory.devices.back().ports.empty())
        return line_error(line_number, line, "`gid` before any `port`");
      RdmaGid gid;
      int type = 0;
      if (record.words.size() != 2 || !parse_int(record.words[0], gid.index))
        return line_error(line_number, line, "expected `gid INDEX GID type=... [netdev=...]`");
      gid.gid = record.words[1];
      if (!value_of(kGidTypes, record.field("type", "unknown"), type))
        return line_error(line_number, line, "type= must be IB, RoCEv1 or RoCEv2");
      gid.type = static_cast<GidType>(type);
      gid.netdev = record.field("netdev");
      inventory.devices.back().ports.back().gids.push_back(gid);
    } else if (record.kind == "interface") {
      if (record.words.size() != 1)
        return line_error(line_number, line, "expected `interface NAME key=value...`");
      NetInterface interface;
      interface.name = record.words[0];
      interface.up = record.field("up", "0") == "1";
      interface.loopback = record.field("loopback", "0") == "1";
      if (!parse_int(record.field("mtu", "0"), interface.mtu))
        return line_error(line_number, line, "mtu= is a byte count");
      for (auto [first, last] = record.fields.equal_range("ipv4"); first != last; ++first)
        interface.ipv4.push_back(first->second);
      for (auto [first, last] = record.fields.equal_range("ipv6"); first != last; ++first)
        interface.ipv6.push_back(first->second);
      inventory.interfaces.push_back(interface);
    } else if (record.kind == "route") {
      if (record.words.size() != 2 || record.words[0] != "default")
        return line_error(line_number, line, "expected `route default INTERFACE`");
      inventory.default_route_interface = record.words[1];
    } else {
      return line_error(line_number, line,
                        "unknown record '" + record.kind +
                            "' (expected description, device, port, gid, interface, route or note)");
    }
  }
  return inventory;
}

absl::StatusOr<RdmaInventory> read_rdma_inventory_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(fmt::format(
        "cannot read the RDMA inventory '{}': record one with `nanoforge doctor --record-inventory FILE`",
        path));
  }
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<RdmaInventory> inventory = parse_rdma_inventory(text.str());
  if (!inventory.ok())
    return absl::InvalidArgumentError(fmt::format("{}: {}", path, std::string(inventory.status().message())));
  return inventory;
}

std::string format_rdma_inventory(const RdmaInventory& inventory) {
  std::string text = "# nanoforge RDMA inventory (doctor/rdma_inventory.h describes the format)\n";
  if (!inventory.description.empty()) text += fmt::format("description {}\n", inventory.description);
  for (const RdmaDevice& device : inventory.devices) {
    text += fmt::format("device {}", device.name);
    if (!device.pci_address.empty()) text += " pci=" + device.pci_address;
    if (!device.firmware.empty()) text += " fw=" + device.firmware;
    if (device.vendor_part_id != 0) text += fmt::format(" part={}", device.vendor_part_id);
    text += "\n";
    for (const RdmaPort& port : device.ports) {
      text += fmt::format("  port {} state={} link={} mtu={} max_mtu={} width={}X", port.number,
                          to_string(port.state), to_string(port.link_layer), port.active_mtu_bytes,
                          port.max_mtu_bytes, port.width_lanes);
      if (!port.physical_state.empty()) text += " phys=" + port.physical_state;
      if (!port.speed_name.empty()) text += " speed=" + port.speed_name;
      if (!port.netdev.empty()) text += " netdev=" + port.netdev;
      text += "\n";
      for (const RdmaGid& gid : port.gids) {
        text += fmt::format("    gid {} {} type={}", gid.index, gid.gid, to_string(gid.type));
        if (!gid.netdev.empty()) text += " netdev=" + gid.netdev;
        text += "\n";
      }
    }
  }
  for (const NetInterface& interface : inventory.interfaces) {
    text += fmt::format("interface {} up={} mtu={}", interface.name, interface.up ? 1 : 0, interface.mtu);
    if (interface.loopback) text += " loopback=1";
    for (const std::string& address : interface.ipv4)
      text += " ipv4=" + address;
    for (const std::string& address : interface.ipv6)
      text += " ipv6=" + address;
    text += "\n";
  }
  if (!inventory.default_route_interface.empty())
    text += fmt::format("route default {}\n", inventory.default_route_interface);
  for (const std::string& note : inventory.notes)
    text += fmt::format("note {}\n", note);
  return text;
}

}  // namespace nanoforge
