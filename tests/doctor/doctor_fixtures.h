// The recorded machines of tests/doctor/recorded/, loaded for the doctor tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "doctor/rdma_inventory.h"
#include "tests/test_paths.h"

namespace nanoforge::testing {

inline std::string recorded_path(const std::string& name) {
  return nanoforge::test::source_path("tests/doctor/recorded/") + name;
}

inline RdmaInventory recorded(const std::string& name) {
  absl::StatusOr<RdmaInventory> inventory = read_rdma_inventory_file(recorded_path(name));
  EXPECT_TRUE(inventory.ok()) << inventory.status();
  return inventory.ok() ? *inventory : RdmaInventory{};
}

}  // namespace nanoforge::testing
