// H5File: round trips of datasets and attributes, and errors that name the file and object.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>

#include "support/h5_file.h"

namespace nanoforge {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nanoforge_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST(H5File, WritesAndReadsDatasetsWithShapes) {
  const std::string path = temp_path("roundtrip.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const float values[] = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
    ASSERT_TRUE(file->write("/group/nested/matrix", {2, 3}, values).ok());
    const float scalar = 7.0f;
    ASSERT_TRUE(file->write("/scalar", {}, &scalar).ok());
    const int64_t ids[] = {3, -1};
    ASSERT_TRUE(file->write("/ids", {2}, ids).ok());
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto matrix = file->read<float>("/group/nested/matrix");
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  EXPECT_EQ(matrix->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(matrix->values, (std::vector<float>{1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f}));
  auto as_double = file->read<double>("/group/nested/matrix");
  ASSERT_TRUE(as_double.ok());
  EXPECT_EQ(as_double->values[2], 3.25);
  auto scalar = file->read<float>("/scalar");
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->values, std::vector<float>{7.0f});
  auto ids = file->read<int32_t>("/ids");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->values, (std::vector<int32_t>{3, -1}));
  EXPECT_TRUE(file->has("/group/nested"));
  EXPECT_FALSE(file->has("/group/missing/deeper"));
  auto members = file->members("/");
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(*members, (std::vector<std::string>{"group", "ids", "scalar"}));
  std::filesystem::remove(path);
}

TEST(H5File, ErrorsNameTheFileAndTheObject) {
  const std::string path = temp_path("errors.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    const int64_t ids[] = {1, 2};
    ASSERT_TRUE(file->write("/ids", {2}, ids).ok());
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  auto missing = file->read<float>("/weights/w");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/weights/w"), std::string::npos);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
  auto wrong_class = file->read<float>("/ids");
  EXPECT_EQ(wrong_class.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_class.status().message().find("integer"), std::string::npos);
  auto attribute = file->read_int_attribute("/", "n_layer");
  EXPECT_EQ(attribute.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(attribute.status().message().find("n_layer"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(H5File, RefusesMissingAndNonHdf5Files) {
  EXPECT_EQ(H5File::open_read(temp_path("does_not_exist.h5")).status().code(), absl::StatusCode::kNotFound);
  const std::string text = temp_path("not_hdf5.h5");
  std::ofstream(text) << "this is not HDF5";
  auto opened = H5File::open_read(text);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("not an HDF5 file"), std::string::npos);
  std::filesystem::remove(text);
}

TEST(H5File, ReadsStringAndNumericAttributes) {
  const std::string path = temp_path("attributes.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t group = H5Gcreate2(file, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t scalar = H5Screate(H5S_SCALAR);
    const int64_t layers = 4;
    hid_t attribute = H5Acreate2(group, "n_layer", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &layers);
    H5Aclose(attribute);
    hid_t string_type = H5Tcopy(H5T_C_S1);  // variable-length, as h5py writes str attributes
    H5Tset_size(string_type, H5T_VARIABLE);
    const char* pattern = "SSSL";
    attribute = H5Acreate2(group, "window_pattern", string_type, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, string_type, &pattern);
    H5Aclose(attribute);
    H5Tclose(string_type);
    H5Sclose(scalar);
    H5Gclose(group);
    H5Fclose(file);
  }
  auto file = H5File::open_read(path, H5File::VariableLengthStrings::kTrust);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->read_int_attribute("/config", "n_layer"), 4);
  EXPECT_EQ(*file->read_string_attribute("/config", "window_pattern"), "SSSL");
  EXPECT_EQ(file->read_string_attribute("/config", "n_layer").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace nanoforge
