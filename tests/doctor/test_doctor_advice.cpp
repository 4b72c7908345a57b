// advise_nccl on every recorded machine: the NCCL_IB_HCA list, GID index, socket interface, fallback and the
// exact set of warnings; then variations of the recorded machines for the rules no fixture shows on its own.
#include <gtest/gtest.h>

#include <algorithm>

#include "doctor/nccl_env_advice.h"
#include "doctor/rdma_report.h"
#include "doctor_fixtures.h"

namespace nanoforge {
namespace {

using testing::recorded;

std::string setting(const NcclAdvice& advice, const std::string& name) {
  const NcclSetting* found = advice.find(name);
  return found == nullptr ? "<unset>" : found->value;
}

std::vector<std::string> warning_kinds(const NcclAdvice& advice) {
  std::vector<std::string> kinds;
  for (const DoctorWarning& warning : advice.warnings)
    kinds.push_back(std::string(to_string(warning.kind)) + " " + warning.subject);
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

std::string all_warnings(const NcclAdvice& advice) {
  std::string text;
  for (const DoctorWarning& warning : advice.warnings)
    text += std::string(to_string(warning.kind)) + " " + warning.subject + ": " + warning.message + "\n";
  return text;
}

RdmaDevice& device_named(RdmaInventory& inventory, const std::string& name) {
  return *std::find_if(inventory.devices.begin(), inventory.devices.end(),
                       [&](const RdmaDevice& device) { return device.name == name; });
}

TEST(DoctorAdvice, SparkWithOneCableUsesBothDevicesOfTheCage) {
  const RdmaInventory spark = recorded("spark_one_cable.txt");
  const NcclAdvice advice = advise_nccl(spark);
  EXPECT_EQ(advice.transport, NcclTransport::kRoce);
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "enp1s0f0np0");
  EXPECT_EQ(setting(advice, "NCCL_IB_DISABLE"), "<unset>");
  EXPECT_EQ(setting(advice, "NCCL_IB_ROCE_VERSION_NUM"), "<unset>");
  EXPECT_TRUE(advice.warnings.empty()) << all_warnings(advice);
  // The second cage is simply not cabled: a note, not a warning.
  ASSERT_EQ(advice.notes.size(), 1u);
  EXPECT_NE(advice.notes[0].find("rocep1s0f1 port 1 and roceP2p1s0f1 port 1"), std::string::npos)
      << advice.notes[0];
  ASSERT_NE(split_port_sibling(spark, spark.devices[0]), nullptr);
  EXPECT_EQ(split_port_sibling(spark, spark.devices[0])->name, "roceP2p1s0f0");
}

TEST(DoctorAdvice, SparkWithOneHalfUpWarnsAboutTheMissingHalfAndTheSlowCable) {
  const NcclAdvice advice = advise_nccl(recorded("spark_half_link.txt"));
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "rocep1s0f0");
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(warning_kinds(advice),
            (std::vector<std::string>{"half_port_active rocep1s0f0 port 1", "slow_link rocep1s0f0 port 1"}))
      << all_warnings(advice);
  EXPECT_NE(all_warnings(advice).find("roceP2p1s0f0"), std::string::npos);
}

TEST(DoctorAdvice, H100UsesTheEightInfiniBandHcasAndNoGidIndex) {
  const NcclAdvice advice = advise_nccl(recorded("dgx_h100_ib.txt"));
  EXPECT_EQ(advice.transport, NcclTransport::kInfiniBand);
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11");
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "<unset>");
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "eno3");
  EXPECT_EQ(advice.total_rate_gbps(), 8 * 400);
  EXPECT_TRUE(advice.warnings.empty()) << all_warnings(advice);
  // The Ethernet storage NICs are named in notes: two up (left out), two down (ignored).
  int storage_notes = 0;
  for (const std::string& note : advice.notes)
    for (const char* name : {"mlx5_1 ", "mlx5_2 ", "mlx5_7 ", "mlx5_8 "})
      storage_notes += note.find(name) != std::string::npos;
  EXPECT_EQ(storage_notes, 4);
}

TEST(DoctorAdvice, NoRdmaDeviceFallsBackToSocketsOverTheDefaultRoute) {
  const NcclAdvice advice = advise_nccl(recorded("no_rdma.txt"));
  EXPECT_EQ(advice.transport, NcclTransport::kSocket);
  EXPECT_EQ(setting(advice, "NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "eth0");  // not docker0
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "<unset>");
  EXPECT_TRUE(advice.warnings.empty()) << all_warnings(advice);
  ASSERT_FALSE(advice.notes.empty());
  EXPECT_NE(advice.notes[0].find("socket transport"), std::string::npos);
}

TEST(DoctorAdvice, MisconfiguredServerGetsEveryWarning) {
  const NcclAdvice advice = advise_nccl(recorded("misconfigured.txt"));
  EXPECT_EQ(advice.transport, NcclTransport::kRoce);
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "mlx5_0");
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "1");  // the v1 GID carrying 10.10.1.5
  EXPECT_EQ(setting(advice, "NCCL_IB_ROCE_VERSION_NUM"), "1");
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "ens1f0np0");
  EXPECT_EQ(warning_kinds(advice),
            (std::vector<std::string>{"mtu_below_9000 mlx5_0 port 1", "no_roce_v2_gid mlx5_0 port 1",
                                      "port_down mlx5_1 port 1", "slow_link mlx5_0 port 1"}))
      << all_warnings(advice);
  EXPECT_NE(all_warnings(advice).find("ip link set ens1f0np0 mtu 9000"), std::string::npos);
}

TEST(DoctorAdvice, GidAtDifferentIndicesLeavesTheIndexToNccl) {
  RdmaInventory spark = recorded("spark_one_cable.txt");
  // Drop roceP2p1s0f0's IPv4 v1 GID: its IPv4 v2 GID then sits at index 2, rocep1s0f0's at 3.
  std::vector<RdmaGid>& gids = device_named(spark, "roceP2p1s0f0").ports[0].gids;
  gids.erase(gids.begin() + 2);
  gids[2].index = 2;
  const NcclAdvice advice = advise_nccl(spark);
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "<unset>");
  EXPECT_EQ(warning_kinds(advice), std::vector<std::string>{"gid_index_differs NCCL_IB_GID_INDEX"});
  EXPECT_EQ(advice.data_ports[1].gid_index, 2);
}

TEST(DoctorAdvice, WithoutIpv4TheLinkLocalV2GidIsUsedAndFlagged) {
  RdmaInventory spark = recorded("spark_one_cable.txt");
  for (RdmaDevice& device : spark.devices)
    device.ports[0].gids.resize(2);
  const NcclAdvice advice = advise_nccl(spark);
  EXPECT_EQ(setting(advice, "NCCL_IB_GID_INDEX"), "1");
  EXPECT_EQ(warning_kinds(advice),
            (std::vector<std::string>{"no_ipv4_gid roceP2p1s0f0 port 1", "no_ipv4_gid rocep1s0f0 port 1"}));
}

TEST(DoctorAdvice, SmallMtuIsFoundFromTheRdmaMtuWhenTheNetdevIsUnknown) {
  RdmaInventory spark = recorded("spark_one_cable.txt");
  spark.interfaces.clear();
  spark.default_route_interface.clear();
  device_named(spark, "rocep1s0f0").ports[0].active_mtu_bytes = 1024;
  const NcclAdvice advice = advise_nccl(spark);
  EXPECT_EQ(warning_kinds(advice), (std::vector<std::string>{"mtu_below_9000 rocep1s0f0 port 1",
                                                             "no_socket_interface NCCL_SOCKET_IFNAME"}));
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "<unset>");
}

TEST(DoctorAdvice, DevicesWithNoActivePortFallBackToSockets) {
  RdmaInventory spark = recorded("spark_one_cable.txt");
  for (RdmaDevice& device : spark.devices)
    device.ports[0].state = PortState::kDown;
  const NcclAdvice advice = advise_nccl(spark);
  EXPECT_EQ(advice.transport, NcclTransport::kSocket);
  EXPECT_EQ(setting(advice, "NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(setting(advice, "NCCL_SOCKET_IFNAME"), "enP7s7");
  EXPECT_EQ(warning_kinds(advice), std::vector<std::string>{"no_active_port RDMA"});
}

TEST(DoctorAdvice, SlowerRailIsASpeedMismatch) {
  RdmaInventory h100 = recorded("dgx_h100_ib.txt");
  device_named(h100, "mlx5_4").ports[0].speed_name = "HDR";  // 200 Gb/s among 400s
  const NcclAdvice advice = advise_nccl(h100);
  EXPECT_EQ(warning_kinds(advice), std::vector<std::string>{"speed_mismatch mlx5_4 port 1"});
}

TEST(DoctorAdvice, DownInfiniBandRailIsAWarning) {
  RdmaInventory h100 = recorded("dgx_h100_ib.txt");
  device_named(h100, "mlx5_9").ports[0].state = PortState::kDown;
  const NcclAdvice advice = advise_nccl(h100);
  EXPECT_EQ(warning_kinds(advice), std::vector<std::string>{"port_down mlx5_9 port 1"});
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_10,mlx5_11");
}

TEST(DoctorAdvice, HcaListIsExactWhenAPrefixWouldCatchAnotherDevice) {
  RdmaInventory h100 = recorded("dgx_h100_ib.txt");
  // Make mlx5_1 an InfiniBand rail and take mlx5_10 down: plain "mlx5_1" would also open mlx5_10.
  RdmaPort& mlx5_1 = device_named(h100, "mlx5_1").ports[0];
  mlx5_1 = device_named(h100, "mlx5_0").ports[0];
  device_named(h100, "mlx5_10").ports[0].state = PortState::kDown;
  const NcclAdvice advice = advise_nccl(h100);
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "=mlx5_0,mlx5_1,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_11");
}

TEST(DoctorAdvice, MultiPortDevicesAreNamedWithTheirPort) {
  RdmaInventory misconfigured = recorded("misconfigured.txt");
  // One device with both ports, as mlx4 and some VPI setups show them.
  RdmaDevice& device = device_named(misconfigured, "mlx5_0");
  RdmaPort second = device.ports[0];
  second.number = 2;
  device.ports.push_back(second);
  misconfigured.devices.pop_back();
  const NcclAdvice advice = advise_nccl(misconfigured);
  EXPECT_EQ(setting(advice, "NCCL_IB_HCA"), "mlx5_0:1,mlx5_0:2");
}

TEST(DoctorAdvice, NcclListMatchingFollowsNccl) {
  EXPECT_TRUE(nccl_list_matches("mlx5_1", "mlx5_10"));  // prefixes, as NCCL matches them
  EXPECT_FALSE(nccl_list_matches("=mlx5_1", "mlx5_10"));
  EXPECT_TRUE(nccl_list_matches("=mlx5_1,mlx5_10", "mlx5_10"));
  EXPECT_FALSE(nccl_list_matches("^mlx5_1", "mlx5_10"));
  EXPECT_TRUE(nccl_list_matches("^=mlx5_1", "mlx5_10"));
  EXPECT_TRUE(nccl_list_matches("mlx5_0:1", "mlx5_0", 1));
  EXPECT_FALSE(nccl_list_matches("mlx5_0:2", "mlx5_0", 1));
  EXPECT_TRUE(nccl_list_matches("rocep1s0f0,roceP2p1s0f0", "roceP2p1s0f0", 1));
  EXPECT_FALSE(nccl_list_matches("rocep1s0f0", "roceP2p1s0f0", 1));  // case matters
  EXPECT_TRUE(nccl_list_matches("", "anything"));
  EXPECT_TRUE(nccl_list_matches("eth", "eth0"));
  EXPECT_FALSE(nccl_list_matches("^docker,lo", "lo"));
}

}  // namespace
}  // namespace nanoforge
