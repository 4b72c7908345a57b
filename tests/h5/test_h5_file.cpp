// H5File: round trips of datasets and attributes, and errors that name the file and object.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "h5/file.h"

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

// Writes a scalar string attribute `name` on /config with the C API: variable-length (as h5py writes str) or
// fixed-length (as nanoforge writes them).
void write_raw_string_attribute(hid_t group, const char* name, const std::string& value, bool variable) {
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t string_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(string_type, variable ? H5T_VARIABLE : value.size());
  hid_t attribute = H5Acreate2(group, name, string_type, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const char* text = value.c_str();
  H5Awrite(attribute, string_type, variable ? static_cast<const void*>(&text) : text);
  H5Aclose(attribute);
  H5Tclose(string_type);
  H5Sclose(scalar);
}

TEST(H5File, ReadsFixedLengthStringAndNumericAttributes) {
  const std::string path = temp_path("attributes.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t group = H5Gcreate2(file, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t scalar = H5Screate(H5S_SCALAR);
    const int64_t layers = 4;
    hid_t attribute = H5Acreate2(group, "n_layer", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, H5T_NATIVE_INT64, &layers);
    H5Aclose(attribute);
    H5Sclose(scalar);
    write_raw_string_attribute(group, "window_pattern", "SSSL", /*variable=*/false);
    H5Gclose(group);
    H5Fclose(file);
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->read_int_attribute("/config", "n_layer"), 4);
  EXPECT_EQ(*file->read_string_attribute("/config", "window_pattern"), "SSSL");
  EXPECT_EQ(file->read_string_attribute("/config", "n_layer").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::remove(path);
}

TEST(H5File, WrittenStringsAreFixedLengthAndRoundTrip) {
  const std::string path = temp_path("strings.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write_string_attribute("/", "empty", "").ok());
    ASSERT_TRUE(file->write_string_attribute("/", "utf8", "caf\xc3\xa9 \xe2\x82\xac").ok());
    ASSERT_TRUE(file->close().ok());
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->read_string_attribute("/", "empty"), "");
  EXPECT_EQ(*file->read_string_attribute("/", "utf8"), "caf\xc3\xa9 \xe2\x82\xac");
  std::filesystem::remove(path);
}

// A variable-length string lives in libhdf5's global heap, whose reader loops forever on a collection whose
// first object has index 0 and size 0 (what a probe's mutated trainer.h5 did). nanoforge never reads it: the
// attribute is refused from its type alone, with the way to rewrite it.
TEST(H5File, VariableLengthStringIsRefusedWithoutReadingTheGlobalHeap) {
  const std::string path = temp_path("vlen.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    write_raw_string_attribute(root, "recipe", "[model]\ndepth = 4\n", /*variable=*/true);
    H5Gclose(root);
    H5Fclose(file);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos) << "a variable-length string should be in a global heap collection";
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(heap + 16),
            bytes.begin() + static_cast<std::ptrdiff_t>(heap + 18), '\0');
  std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(heap + 24),
            bytes.begin() + static_cast<std::ptrdiff_t>(heap + 32), '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::StatusOr<std::string> recipe = file->read_string_attribute("/", "recipe");
  EXPECT_EQ(recipe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(recipe.status().message().find("variable-length"), std::string::npos) << recipe.status();
  EXPECT_NE(recipe.status().message().find("tools/upgrade_h5.py strings"), std::string::npos)
      << recipe.status();
  std::filesystem::remove(path);
}

// A chunked dataset that claims 2^40 elements but never wrote one keeps the file small; reading it would
// allocate 2 TB. It is refused by its size against the file's before anything is allocated.
TEST(H5File, DatasetClaimingMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
  const std::string path = temp_path("huge_claim.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {hsize_t{1} << 40}, chunk[1] = {1024};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t properties = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(properties, 1, chunk);
    hid_t dataset = H5Dcreate2(file, "tokens", H5T_STD_U16LE, space, H5P_DEFAULT, properties, H5P_DEFAULT);
    ASSERT_GE(dataset, 0);
    H5Dclose(dataset);
    H5Pclose(properties);
    H5Sclose(space);
    H5Fclose(file);
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  for (const absl::Status& status :
       {file->read<uint16_t>("/tokens").status(), file->dataset_layout("/tokens").status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(status.message().find("claims 1099511627776 elements"), std::string::npos) << status;
  }
  std::filesystem::remove(path);
}

// The probe's mutated trainer.h5 threw std::length_error out of members(): libhdf5 counted the group's
// members but could not name one (H5Lget_name_by_idx returned -1, taken as a length). Reproduced here by
// overwriting the root group's symbol-table addresses (bytes 128..135 of this file as libhdf5 1.10 lays it
// out).
TEST(H5File, AGroupWhoseMembersCannotBeNamedIsAnErrorNotAnException) {
  const std::string path = temp_path("unnamed_members.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[1] = {4};
    const float values[4] = {1, 2, 3, 4};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    for (const char* name : {"alpha", "beta", "gamma"}) {
      hid_t dataset = H5Dcreate2(file, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
      H5Dclose(dataset);
    }
    H5Sclose(space);
    H5Fclose(file);
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  bytes[128] = '\xff';
  std::ofstream(path, std::ios::binary) << bytes;
  // The walk of the group tree at open (h5/group_check.h) now finds the damage before members() runs.
  absl::StatusOr<H5File> file = absl::InternalError("not opened");
  EXPECT_NO_THROW(file = H5File::open_read(path));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
  EXPECT_NE(file.status().message().find("the group / is damaged (its local heap has no HEAP signature"),
            std::string::npos)
      << file.status();
  std::filesystem::remove(path);
}

// The superblock is checked before libhdf5 parses anything: short files, a wrong signature, an unknown
// version, other address sizes, a user block, and an end-of-file address past the end are each named.
TEST(H5File, DamagedSuperblocksAreRefusedBeforeLibhdf5ReadsThem) {
  const std::string good = temp_path("superblock_good.h5");
  {
    auto file = H5File::create(good);
    ASSERT_TRUE(file.ok());
    const float value = 1;
    ASSERT_TRUE(file->write("/x", {1}, &value).ok());
  }
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_TRUE(H5File::open_read(good).ok());
  ASSERT_EQ(bytes[8], 0) << "HDF5's default superblock is version 0";
  struct Damage {
    std::string name, expected;
    std::function<void(std::string&)> apply;
  };
  const std::vector<Damage> damages = {
      {"short", "shorter than any HDF5 superblock", [](std::string& b) { b.resize(20); }},
      {"signature", "no HDF5 signature", [](std::string& b) { b[1] = 'X'; }},
      {"version", "superblock version 7", [](std::string& b) { b[8] = 7; }},
      {"offsets", "4-byte addresses", [](std::string& b) { b[13] = 4; }},
      {"base", "base address", [](std::string& b) { b[24] = 1; }},
      {"truncated", "truncated: the superblock says the file ends at byte",
       [](std::string& b) { b.resize(b.size() - 100); }},
      {"end", "end-of-file address",
       [](std::string& b) { std::fill(b.begin() + 40, b.begin() + 48, '\xff'); }},
  };
  for (const Damage& damage : damages) {
    std::string damaged = bytes;
    damage.apply(damaged);
    const std::string path = temp_path("superblock_" + damage.name + ".h5");
    std::ofstream(path, std::ios::binary) << damaged;
    const absl::Status status = H5File::open_read(path).status();
    EXPECT_FALSE(status.ok()) << damage.name;
    EXPECT_NE(status.message().find(damage.expected), std::string::npos) << damage.name << ": " << status;
    EXPECT_NE(status.message().find(path), std::string::npos) << status;
    std::filesystem::remove(path);
  }
  std::filesystem::remove(good);
}

}  // namespace
}  // namespace nanoforge
