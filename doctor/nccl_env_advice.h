// From an RdmaInventory to the NCCL environment a data-parallel run should have, and what looks wrong: a pure
// function, so every rule is tested on recorded machines (tests/doctor/recorded/). The rules follow NVIDIA's
// DGX Spark playbooks and NCCL's documented variables; docs/doctor.md lists each setting and why (both
// devices of a Spark's split QSFP port in NCCL_IB_HCA, the RoCE v2 GID carrying IPv4, the socket interface).
// The user's own environment always wins; review_nccl_environment says which values are kept, and which of
// them will make NCCL fail (a problem) or run slowly (a warning).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "doctor/rdma_inventory.h"

namespace nanoforge {

enum class NcclTransport { kInfiniBand, kRoce, kSocket };
const char* to_string(NcclTransport transport);

enum class WarningKind {
  kNoActivePort,       // RDMA devices exist but no port is up
  kPortDown,           // a port of the data fabric is down (fewer rails than the machine has)
  kHalfPortActive,     // one of a split port's two devices is up, the other not (Spark: half bandwidth)
  kMtuBelow9000,       // RoCE netdev MTU below 9000 (RDMA MTU below 4096)
  kSlowLink,           // a data port below 100 Gb/s, or a Spark half below 200 Gb/s
  kSpeedMismatch,      // data ports at different rates: rings run at the slowest
  kNoRoceV2Gid,        // only RoCE v1 GIDs: L2-only, not routable
  kNoIpv4Gid,          // no IPv4-carrying GID: the netdev has no IPv4 address
  kGidIndexDiffers,    // the chosen GID sits at different indices on different ports
  kNoSocketInterface,  // no interface with an address for NCCL's bootstrap
  kUserSetting,        // a value the user set that NCCL will accept but that costs bandwidth
};
const char* to_string(WarningKind kind);

struct DoctorWarning {
  WarningKind kind;
  std::string subject;  // "rocep1s0f0 port 1", "enp1s0f0np0", "NCCL_IB_HCA"
  std::string message;  // what was found, what it costs, what to do
};

// A warning's subject for an RDMA port: "rocep1s0f0 port 1".
std::string port_subject(const std::string& device, int port);

// Whether an interface has an IPv4 or IPv6 address (what NCCL's sockets need).
bool has_address(const NetInterface& interface);

// One RDMA port NCCL will use, with the GID chosen on it (-1 for InfiniBand ports).
struct NcclDataPort {
  std::string device;
  int port = 1;
  LinkLayer link_layer = LinkLayer::kUnknown;
  double rate_gbps = 0;
  int gid_index = -1;
  GidType gid_type = GidType::kUnknown;
  std::string netdev;
};

struct NcclSetting {
  std::string name;
  std::string value;
  std::string reason;
};

struct NcclAdvice {
  NcclTransport transport = NcclTransport::kSocket;
  std::vector<NcclDataPort> data_ports;
  std::vector<NcclSetting> settings;  // in the order to print them
  std::vector<DoctorWarning> warnings;
  std::vector<std::string> notes;  // informative: ignored ports, what the fallback is

  const NcclSetting* find(const std::string& name) const;
  bool has_warning(WarningKind kind) const;
  double total_rate_gbps() const;
};

NcclAdvice advise_nccl(const RdmaInventory& inventory);

// The device of a Spark-style split port sharing `device`'s physical port: same PCI bus/device/function,
// other PCI domain, same adapter model (rocep1s0f0 = 0000:01:00.0 and roceP2p1s0f0 = 0002:01:00.0). nullptr
// when none.
const RdmaDevice* split_port_sibling(const RdmaInventory& inventory, const RdmaDevice& device);

// NCCL's interface-list matching (NCCL_IB_HCA, NCCL_SOCKET_IFNAME): comma-separated prefixes, optional
// `:port`; a leading '^' excludes, a leading '=' (after any '^') matches names exactly. port -1: any.
bool nccl_list_matches(const std::string& list, const std::string& name, int port = -1);

// What the user's environment does to the advice. Every NCCL_* variable the advice sets, and the ones below
// that change NCCL's network choice, are looked at.
struct EnvDecision {
  std::string name;
  std::string advised;  // empty when doctor advises nothing for this name
  std::optional<std::string> user_value;
  bool exported() const { return !user_value && !advised.empty(); }  // doctor prints `export NAME=advised`
};

struct EnvReview {
  std::vector<EnvDecision> decisions;
  std::vector<DoctorWarning> warnings;
  std::vector<std::string> problems;  // will make training fail: what, and what to do
};

// The variable names review_nccl_environment reads.
const std::vector<std::string>& reviewed_nccl_variables();

EnvReview review_nccl_environment(const RdmaInventory& inventory, const NcclAdvice& advice,
                                  const std::map<std::string, std::string>& environment);

}  // namespace nanoforge
