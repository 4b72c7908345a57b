// probe_rdma_inventory on the machine the tests run on. On CI (no RDMA NIC, no /sys/class/infiniband)
// libibverbs lists no device: the inventory must be empty, say why, and lead to the socket fallback. On a
// machine with RDMA devices, what the probe read must agree with sysfs. A build without libibverbs lists no
// device anywhere and says how to get them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "doctor/nccl_env_advice.h"
#include "doctor/rdma_probe.h"
#include "doctor/rdma_report.h"

namespace nanoforge {
namespace {

namespace fs = std::filesystem;

TEST(DoctorProbe, ThisMachineIsReadAndItsLoopbackFound) {
  absl::StatusOr<RdmaInventory> inventory = probe_rdma_inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  bool loopback = false;
  for (const NetInterface& interface : inventory->interfaces)
    loopback |= interface.loopback && interface.up && !interface.ipv4.empty();
  EXPECT_TRUE(loopback) << format_rdma_inventory(*inventory);
}

TEST(DoctorProbe, WithoutRdmaDevicesTheInventoryIsEmptyAndSaysWhy) {
  if (fs::exists("/sys/class/infiniband") && !fs::is_empty("/sys/class/infiniband"))
    GTEST_SKIP() << "this machine has RDMA devices";
  absl::StatusOr<RdmaInventory> inventory = probe_rdma_inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_TRUE(inventory->devices.empty());
  ASSERT_EQ(inventory->notes.size(), 1u);
  EXPECT_NE(inventory->notes[0].find("RDMA"), std::string::npos) << inventory->notes[0];
  const NcclAdvice advice = advise_nccl(*inventory);
  EXPECT_EQ(advice.transport, NcclTransport::kSocket);
  ASSERT_NE(advice.find("NCCL_IB_DISABLE"), nullptr);
  EXPECT_EQ(advice.find("NCCL_IB_DISABLE")->value, "1");
  const std::string report = format_rdma_report(*inventory, advice);
  EXPECT_NE(report.find("RDMA devices (libibverbs): 0"), std::string::npos) << report;
  EXPECT_NE(report.find("NCCL transport: sockets"), std::string::npos) << report;
}

#ifdef NANOFORGE_HAVE_IBVERBS
TEST(DoctorProbe, RdmaDevicesAgreeWithSysfs) {
  if (!fs::exists("/sys/class/infiniband") || fs::is_empty("/sys/class/infiniband"))
    GTEST_SKIP() << "no RDMA device on this machine";
  absl::StatusOr<RdmaInventory> inventory = probe_rdma_inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  size_t sysfs_devices = 0;
  for ([[maybe_unused]] const fs::directory_entry& entry : fs::directory_iterator("/sys/class/infiniband"))
    ++sysfs_devices;
  EXPECT_EQ(inventory->devices.size() + inventory->notes.size(), sysfs_devices);
  for (const RdmaDevice& device : inventory->devices) {
    for (const RdmaPort& port : device.ports) {
      std::ifstream state(fs::path("/sys/class/infiniband") / device.name / "ports" /
                          std::to_string(port.number) / "state");
      std::string line;
      std::getline(state, line);  // e.g. "4: ACTIVE"
      EXPECT_NE(line.find(to_string(port.state)), std::string::npos) << device.name << " " << line;
    }
  }
}
#else
TEST(DoctorProbe, ABuildWithoutLibibverbsSaysHowToGetTheDevices) {
  absl::StatusOr<RdmaInventory> inventory = probe_rdma_inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_TRUE(inventory->devices.empty());
  ASSERT_EQ(inventory->notes.size(), 1u);
  EXPECT_NE(inventory->notes[0].find("built without libibverbs"), std::string::npos) << inventory->notes[0];
  EXPECT_NE(inventory->notes[0].find("libibverbs-dev"), std::string::npos) << inventory->notes[0];
}
#endif

}  // namespace
}  // namespace nanoforge
