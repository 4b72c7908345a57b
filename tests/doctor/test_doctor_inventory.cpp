// The recorded inventory format: every fixture parses into what its text says, formats back to text that
// parses to the same thing, and malformed lines are refused with their line number.
#include <gtest/gtest.h>

#include "doctor/rdma_inventory.h"
#include "doctor/rdma_report.h"
#include "doctor_fixtures.h"

namespace nanoforge {
namespace {

using testing::recorded;

TEST(DoctorInventory, SparkFixtureHasTwoDevicesPerQsfpCage) {
  const RdmaInventory spark = recorded("spark_one_cable.txt");
  ASSERT_EQ(spark.devices.size(), 4u);
  EXPECT_EQ(spark.description, "DGX Spark, one QSFP112 cable in cage 0");
  const RdmaDevice& first = spark.devices[0];
  EXPECT_EQ(first.name, "rocep1s0f0");
  EXPECT_EQ(first.pci_address, "0000:01:00.0");
  EXPECT_EQ(first.vendor_part_id, 4129);
  ASSERT_EQ(first.ports.size(), 1u);
  const RdmaPort& port = first.ports[0];
  EXPECT_EQ(port.state, PortState::kActive);
  EXPECT_EQ(port.link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(port.active_mtu_bytes, 4096);
  EXPECT_EQ(port.rate_gbps(), 200);  // 4X HDR
  ASSERT_EQ(port.gids.size(), 4u);
  EXPECT_EQ(port.gids[3].index, 3);
  EXPECT_EQ(port.gids[3].type, GidType::kRoceV2);
  EXPECT_EQ(port.gids[3].netdev, "enp1s0f0np0");
  EXPECT_EQ(readable_gid(port.gids[3].gid), "::ffff:192.168.100.10");
  EXPECT_EQ(spark.default_route_interface, "enP7s7");
  const NetInterface* netdev = spark.find_interface("enp1s0f0np0");
  ASSERT_NE(netdev, nullptr);
  EXPECT_TRUE(netdev->up);
  EXPECT_EQ(netdev->mtu, 9000);
  EXPECT_EQ(netdev->ipv4, std::vector<std::string>{"192.168.100.10"});
}

TEST(DoctorInventory, H100FixtureHasEightNdrInfiniBandPorts) {
  const RdmaInventory h100 = recorded("dgx_h100_ib.txt");
  int infiniband = 0;
  for (const RdmaDevice& device : h100.devices) {
    for (const RdmaPort& port : device.ports) {
      if (port.link_layer != LinkLayer::kInfiniBand) continue;
      ++infiniband;
      EXPECT_EQ(port.rate_gbps(), 400) << device.name;
      ASSERT_EQ(port.gids.size(), 1u);
      EXPECT_EQ(port.gids[0].type, GidType::kIb);
    }
  }
  EXPECT_EQ(infiniband, 8);
}

TEST(DoctorInventory, EveryFixtureRoundTripsThroughTheTextFormat) {
  for (const char* name : {"spark_one_cable.txt", "spark_half_link.txt", "dgx_h100_ib.txt", "no_rdma.txt",
                           "misconfigured.txt"}) {
    SCOPED_TRACE(name);
    const RdmaInventory original = recorded(name);
    const std::string text = format_rdma_inventory(original);
    absl::StatusOr<RdmaInventory> again = parse_rdma_inventory(text);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(format_rdma_inventory(*again), text);
    EXPECT_EQ(again->devices.size(), original.devices.size());
    EXPECT_EQ(again->interfaces.size(), original.interfaces.size());
    EXPECT_EQ(again->notes, original.notes);
  }
}

TEST(DoctorInventory, MalformedLinesAreRefusedWithTheirLineNumber) {
  const auto error = [](const std::string& text) {
    absl::StatusOr<RdmaInventory> inventory = parse_rdma_inventory(text);
    return inventory.ok() ? std::string("accepted") : std::string(inventory.status().message());
  };
  EXPECT_NE(error("port 1 state=ACTIVE\n").find("line 1: `port` before any `device`"), std::string::npos);
  EXPECT_NE(error("device d\n  port 1 state=UP\n").find("line 2: state="), std::string::npos);
  EXPECT_NE(error("device d\n  port 1 state=ACTIVE speed=FAST\n").find("speed="), std::string::npos);
  EXPECT_NE(error("device d\n  port 1 width=four\n").find("width="), std::string::npos);
  EXPECT_NE(error("device d\n port 1\n gid x fe80::1 type=RoCEv2\n").find("line 3"), std::string::npos);
  EXPECT_NE(error("# comment\nswitch s1\n").find("line 2: unknown record 'switch'"), std::string::npos);
  EXPECT_EQ(error("# only comments\n\n"), "accepted");
}

TEST(DoctorInventory, MissingFileSaysHowToRecordOne) {
  absl::StatusOr<RdmaInventory> inventory = read_rdma_inventory_file("/nonexistent/inventory.txt");
  ASSERT_FALSE(inventory.ok());
  EXPECT_NE(std::string(inventory.status().message()).find("--record-inventory"), std::string::npos);
}

TEST(DoctorInventory, RatesAndMtusFollowTheVerbsEnums) {
  EXPECT_EQ(lane_rate_gbps("NDR"), 100);
  EXPECT_EQ(lane_rate_gbps("FDR"), 14);
  EXPECT_EQ(lane_rate_gbps("bogus"), 0);
  EXPECT_EQ(mtu_enum_to_bytes(5), 4096);
  EXPECT_EQ(mtu_enum_to_bytes(3), 1024);
  EXPECT_EQ(mtu_enum_to_bytes(0), 0);
  EXPECT_EQ(adapter_name(4129), "ConnectX-7");
  EXPECT_EQ(readable_gid("fe80:0000:0000:0000:3e6d:66ff:fecc:b3b6"), "fe80::3e6d:66ff:fecc:b3b6");
}

}  // namespace
}  // namespace nanoforge
