// probe_rdma_inventory: the machine's network interfaces (getifaddrs, sysfs) and default route, plus the RDMA
// devices libibverbs lists (doctor/rdma_verbs.h), in an order people read.
#include "doctor/rdma_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "doctor/rdma_verbs.h"
#include "doctor/sysfs.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

std::vector<NetInterface> read_interfaces() {
  std::vector<NetInterface> interfaces;
  ifaddrs* addresses = nullptr;
  if (getifaddrs(&addresses) != 0) return interfaces;
  for (ifaddrs* address = addresses; address != nullptr; address = address->ifa_next) {
    auto found = std::find_if(interfaces.begin(), interfaces.end(), [&](const NetInterface& interface) {
      return interface.name == address->ifa_name;
    });
    if (found == interfaces.end()) {
      NetInterface interface;
      interface.name = address->ifa_name;
      interface.up = (address->ifa_flags & IFF_UP) && (address->ifa_flags & IFF_RUNNING);
      interface.loopback = address->ifa_flags & IFF_LOOPBACK;
      const std::string mtu = read_sysfs_line(fs::path("/sys/class/net") / interface.name / "mtu");
      interface.mtu = mtu.empty() ? 0 : std::atoi(mtu.c_str());
      interfaces.push_back(interface);
      found = interfaces.end() - 1;
    }
    if (address->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (address->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(address->ifa_addr)->sin_addr, text, sizeof text);
      found->ipv4.push_back(text);
    } else if (address->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(address->ifa_addr)->sin6_addr, text, sizeof text);
      found->ipv6.push_back(text);
    }
  }
  freeifaddrs(addresses);
  return interfaces;
}

// The interface of the IPv4 default route with the lowest metric (/proc/net/route: Iface Destination Gateway
// Flags RefCnt Use Metric Mask ...).
std::string default_route_interface() {
  std::ifstream routes("/proc/net/route");
  std::string line, best;
  int best_metric = std::numeric_limits<int>::max();
  std::getline(routes, line);  // header
  while (std::getline(routes, line)) {
    std::istringstream fields(line);
    std::string name, destination, gateway, flags, references, use, mask;
    int metric = 0;
    if (!(fields >> name >> destination >> gateway >> flags >> references >> use >> metric >> mask)) continue;
    if (destination == "00000000" && mask == "00000000" && metric < best_metric) {
      best = name;
      best_metric = metric;
    }
  }
  return best;
}

// Device order for people: case-insensitive, numbers by value (rocep1s0f0, rocep1s0f1, roceP2p1s0f0;
// mlx5_2 before mlx5_10).
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && std::isdigit(static_cast<unsigned char>(a[i_end])))
        ++i_end;
      while (j_end < b.size() && std::isdigit(static_cast<unsigned char>(b[j_end])))
        ++j_end;
      const unsigned long long x = std::stoull(a.substr(i, i_end - i)),
                               y = std::stoull(b.substr(j, j_end - j));
      if (x != y) return x < y;
      i = i_end;
      j = j_end;
      continue;
    }
    const int x = std::tolower(static_cast<unsigned char>(a[i])),
              y = std::tolower(static_cast<unsigned char>(b[j]));
    if (x != y) return x < y;
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

absl::StatusOr<RdmaInventory> probe_rdma_inventory() {
  RdmaInventory inventory;
  inventory.description = "this machine";
  inventory.interfaces = read_interfaces();
  inventory.default_route_interface = default_route_interface();
  add_verbs_devices(inventory);
  std::sort(inventory.devices.begin(), inventory.devices.end(),
            [](const RdmaDevice& a, const RdmaDevice& b) { return natural_less(a.name, b.name); });
  return inventory;
}

}  // namespace nanoforge
