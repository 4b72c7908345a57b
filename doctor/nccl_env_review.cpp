// review_nccl_environment: what the user's own NCCL_* variables do to the advice (nccl_env_advice.h) — kept
// always, and checked for values that will make NCCL fail (a problem) or run slowly (a warning).
#include <absl/strings/numbers.h>
#include <absl/strings/str_join.h>
#include <fmt/format.h>

#include <algorithm>

#include "doctor/nccl_env_advice.h"

namespace nanoforge {

const std::vector<std::string>& reviewed_nccl_variables() {
  static const std::vector<std::string> names = {"NCCL_IB_DISABLE",    "NCCL_IB_HCA",
                                                 "NCCL_IB_GID_INDEX",  "NCCL_IB_ROCE_VERSION_NUM",
                                                 "NCCL_SOCKET_IFNAME", "NCCL_NET"};
  return names;
}

EnvReview review_nccl_environment(const RdmaInventory& inventory, const NcclAdvice& advice,
                                  const std::map<std::string, std::string>& environment) {
  EnvReview review;
  auto user = [&](const std::string& name) -> std::optional<std::string> {
    auto found = environment.find(name);
    if (found == environment.end()) return std::nullopt;
    return found->second;
  };
  for (const std::string& name : reviewed_nccl_variables()) {
    const NcclSetting* setting = advice.find(name);
    EnvDecision decision{name, setting == nullptr ? "" : setting->value, user(name)};
    if (!decision.advised.empty() || decision.user_value) review.decisions.push_back(decision);
  }

  const bool user_disables_ib = user("NCCL_IB_DISABLE").value_or("0") == "1" || user("NCCL_NET") == "Socket";
  const bool ib_disabled = user_disables_ib || (!user("NCCL_IB_DISABLE") && advice.find("NCCL_IB_DISABLE"));
  if (user_disables_ib && advice.transport != NcclTransport::kSocket) {
    review.warnings.push_back(
        {WarningKind::kUserSetting, user("NCCL_NET") == "Socket" ? "NCCL_NET" : "NCCL_IB_DISABLE",
         fmt::format("you disabled NCCL's RDMA transport although {} {} Gb/s of {} is active: NCCL will use "
                     "TCP sockets, far slower across machines",
                     advice.data_ports.size() == 1 ? "a port of" : "ports totalling",
                     advice.total_rate_gbps(), to_string(advice.transport))});
  }

  if (const std::optional<std::string> list = user("NCCL_SOCKET_IFNAME")) {
    std::vector<std::string> usable;
    bool matched = false;
    for (const NetInterface& interface : inventory.interfaces) {
      if (!interface.up || !has_address(interface)) continue;
      usable.push_back(interface.name);
      matched |= nccl_list_matches(*list, interface.name);
    }
    if (!matched) {
      review.problems.push_back(fmt::format(
          "NCCL_SOCKET_IFNAME={} matches no interface that is up with an address (these are: {}): NCCL's "
          "bootstrap will fail with \"no socket interface found\". Unset it or name one of those",
          *list, usable.empty() ? "none" : absl::StrJoin(usable, ", ")));
    }
  }

  // The RDMA ports NCCL would open under the user's NCCL_IB_HCA (or the advised one).
  std::vector<std::pair<const RdmaDevice*, const RdmaPort*>> opened;
  const std::optional<std::string> user_hca = user("NCCL_IB_HCA");
  for (const RdmaDevice& device : inventory.devices) {
    for (const RdmaPort& port : device.ports) {
      if (port.state != PortState::kActive) continue;
      const bool advised = std::any_of(
          advice.data_ports.begin(), advice.data_ports.end(),
          [&](const NcclDataPort& p) { return p.device == device.name && p.port == port.number; });
      if (user_hca ? nccl_list_matches(*user_hca, device.name, port.number) : advised)
        opened.emplace_back(&device, &port);
    }
  }
  if (user_hca && !ib_disabled && advice.transport != NcclTransport::kSocket) {
    if (opened.empty()) {
      review.warnings.push_back(
          {WarningKind::kUserSetting, "NCCL_IB_HCA",
           fmt::format(
               "NCCL_IB_HCA={} matches no active RDMA port: NCCL will find no IB device and fall back "
               "to sockets. Use {}",
               *user_hca, advice.find("NCCL_IB_HCA")->value)});
    } else if (opened.size() < advice.data_ports.size()) {
      review.warnings.push_back(
          {WarningKind::kUserSetting, "NCCL_IB_HCA",
           fmt::format(
               "NCCL_IB_HCA={} opens {} of the {} active data ports ({}): NCCL gets a fraction of the "
               "bandwidth (on a Spark, both devices of the QSFP port are needed)",
               *user_hca, opened.size(), advice.data_ports.size(), advice.find("NCCL_IB_HCA")->value)});
    }
  }

  if (const std::optional<std::string> gid_text = user("NCCL_IB_GID_INDEX");
      gid_text && !ib_disabled && advice.transport == NcclTransport::kRoce) {
    int index = 0;
    if (!absl::SimpleAtoi(*gid_text, &index)) {
      review.problems.push_back(fmt::format(
          "NCCL_IB_GID_INDEX={} is not a number: set a GID index (e.g. {}) or -1 for NCCL's "
          "choice",
          *gid_text, advice.find("NCCL_IB_GID_INDEX") ? advice.find("NCCL_IB_GID_INDEX")->value : "3"));
    } else if (index >= 0) {
      for (const auto& [device, port] : opened) {
        if (port->link_layer != LinkLayer::kEthernet) continue;
        const bool present = std::any_of(port->gids.begin(), port->gids.end(),
                                         [&](const RdmaGid& gid) { return gid.index == index; });
        if (!present) {
          review.problems.push_back(fmt::format(
              "NCCL_IB_GID_INDEX={} but {} has no GID {}: NCCL's connections over it will fail. Use {}",
              index, port_subject(device->name, port->number), index,
              advice.find("NCCL_IB_GID_INDEX") ? advice.find("NCCL_IB_GID_INDEX")->value
                                               : "-1 (NCCL's own choice)"));
        }
      }
    }
  }
  return review;
}

}  // namespace nanoforge
