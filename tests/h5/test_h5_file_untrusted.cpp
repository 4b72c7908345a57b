// H5File on damaged files, as fuzzing the checkpoint and shard readers made them: each test is a class of
// damage that crashed or exhausted the process before, and now comes back as an error naming the file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "h5/file.h"

namespace nanoforge {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("nanoforge_untrusted_" + std::to_string(getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void expect_error(const absl::Status& status, absl::StatusCode code, const std::string& fragment) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status;
}

// A root attribute `window_pattern` holding "SSSL" as a variable-length string, as h5py writes str.
void write_variable_length_string(const std::string& path) {
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  const char* pattern = "SSSL";
  hid_t attribute = H5Acreate2(file, "window_pattern", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, type, &pattern);
  H5Aclose(attribute);
  H5Tclose(type);
  H5Sclose(scalar);
  H5Fclose(file);
}

TEST(H5FileUntrusted, WritesStringsWithAFixedLength) {
  const std::string path = temp_path("fixed_strings.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write_string_attribute("/", "recipe", "[model]\ndepth = 4\n").ok());
    ASSERT_TRUE(file->write_string_attribute("/", "empty", "").ok());
  }
  hid_t raw = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t attribute = H5Aopen(raw, "recipe", H5P_DEFAULT);
  hid_t type = H5Aget_type(attribute);
  EXPECT_EQ(H5Tis_variable_str(type), 0);
  H5Tclose(type);
  H5Aclose(attribute);
  H5Fclose(raw);
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->read_string_attribute("/", "recipe"), "[model]\ndepth = 4\n");
  EXPECT_EQ(*file->read_string_attribute("/", "empty"), "");
  std::filesystem::remove(path);
}

// Fuzzing found it (shards, trainer.h5): a variable-length string's global-heap reference with a damaged
// object index made libhdf5 read outside its heap (SIGSEGV, or a spin in H5HG_read). Such strings are now
// never read, so the damaged reference is never followed.
TEST(H5FileUntrusted, DamagedVariableLengthStringsAreNeverFollowed) {
  const std::string path = temp_path("variable_length.h5");
  write_variable_length_string(path);

  // The attribute's data is the reference: length 4, the collection's address, object index 1.
  std::string bytes = read_bytes(path);
  const uint64_t collection = bytes.find("GCOL");
  ASSERT_NE(collection, std::string::npos);
  std::string reference(16, '\0');
  const uint32_t length = 4, index = 1;
  std::memcpy(reference.data(), &length, 4);
  std::memcpy(reference.data() + 4, &collection, 8);
  std::memcpy(reference.data() + 12, &index, 4);
  const size_t at = bytes.find(reference);
  ASSERT_NE(at, std::string::npos);
  const uint32_t damaged = 0x7fffffff;
  std::memcpy(bytes.data() + at + 12, &damaged, 4);
  write_bytes(path, bytes);

  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const absl::StatusOr<std::string> value = file->read_string_attribute("/", "window_pattern");
  expect_error(value.status(), absl::StatusCode::kInvalidArgument, "variable-length string");
  EXPECT_NE(value.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

// Fuzzing found it (checkpoint files): a link name outside its group's local heap made H5Lget_name_by_idx
// return -1, which members() turned into a string of SIZE_MAX characters (std::length_error, an abort).
TEST(H5FileUntrusted, MembersOfAGroupWithADamagedLinkNameAreAnError) {
  const std::string path = temp_path("damaged_names.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    const int64_t values[] = {1, 2};
    ASSERT_TRUE(file->write("/a", {2}, values).ok());
    ASSERT_TRUE(file->write("/b", {2}, values).ok());
  }
  // The root's symbol-table node: "SNOD", version, reserved, entry count (2 bytes), then 40-byte entries
  // whose first 8 bytes are the link name's offset in the group's local heap. Move the second name far
  // outside it.
  std::string bytes = read_bytes(path);
  const size_t node = bytes.find("SNOD");
  ASSERT_NE(node, std::string::npos);
  const uint64_t outside = uint64_t{1} << 40;
  std::memcpy(bytes.data() + node + 8 + 40, &outside, 8);
  write_bytes(path, bytes);

  // The walk of the group tree at open (h5/group_check.h) finds it before members() could ask.
  const absl::StatusOr<H5File> file = H5File::open_read(path);
  expect_error(file.status(), absl::StatusCode::kDataLoss,
               "the group / is damaged (a link's name lies outside its local heap)");
  EXPECT_NE(file.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

// Fuzzing found it (shards): libhdf5 1.10 copies an attribute's name, type, shape and value out of its
// message without checking their sizes against the message's, so a damaged size made it read past its
// buffer (heap-buffer-overflow in H5O__msg_iterate_real under H5Aexists_by_name). The object header is now
// checked first.
TEST(H5FileUntrusted, RefusesAnAttributeMessageWhosePartsOverrunIt) {
  const std::string path = temp_path("damaged_attribute.h5");
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write_int_attribute("/", "steps_taken", 5).ok());
  }
  {
    auto intact = H5File::open_read(path);
    ASSERT_TRUE(intact.ok());
    EXPECT_EQ(*intact->read_int_attribute("/", "steps_taken"), 5);
  }
  // A version-1 attribute message: version, reserved, then the name's size (2 bytes), 8 bytes before the
  // name.
  std::string bytes = read_bytes(path);
  const size_t name = bytes.find(std::string("steps_taken") + '\0');
  ASSERT_NE(name, std::string::npos);
  ASSERT_EQ(bytes[name - 8], 1);
  const uint16_t overrunning = 0x7000;
  std::memcpy(bytes.data() + name - 6, &overrunning, 2);
  write_bytes(path, bytes);

  // Every object header is checked as the group tree is walked at open, before libhdf5 reads the file.
  const absl::StatusOr<H5File> file = H5File::open_read(path);
  expect_error(file.status(), absl::StatusCode::kDataLoss,
               "the object header of / is damaged (an attribute's name, type, shape or value does not fit");
  EXPECT_NE(file.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

// A dataset may claim any shape without storing it (HDF5 allocates contiguous data late): 2^40 tokens in a
// file of a few KB. Reading it used to allocate what it claimed (std::bad_alloc); now the claim is compared
// with the file's size first.
TEST(H5FileUntrusted, RefusesADatasetLargerThanItsFile) {
  const std::string path = temp_path("claims_too_much.h5");
  {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[] = {hsize_t{1} << 40};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dataset =
        H5Dcreate2(file, "tokens", H5T_NATIVE_UINT16, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
  }
  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const absl::StatusOr<HostArray<uint16_t>> tokens = file->read<uint16_t>("/tokens");
  expect_error(tokens.status(), absl::StatusCode::kDataLoss,
               "dataset /tokens claims 1099511627776 elements of 2 bytes, more than the file");
  std::filesystem::remove(path);
}

// Replaces the first occurrence of `from` in the file by `to` (same length).
void patch_bytes(const std::string& path, const std::string& from, const std::string& to) {
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, from.size(), to);
  write_bytes(path, bytes);
}

// Fuzzing found it (shards): a contiguous dataset's layout message with its version byte changed from 3 to
// 1, which libhdf5 then reads as a compact dataset of no bytes, and H5Dread copied its 104 bytes from a null
// pointer (SIGSEGV). The stored size is now compared with what the shape and type need.
TEST(H5FileUntrusted, RefusesADatasetThatStoresLessThanItsShapeNeeds) {
  const std::string path = temp_path("compact_nothing.h5");
  const std::vector<int64_t> offsets = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  haddr_t address = 0;
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write("/offsets", {13}, offsets.data()).ok());
  }
  {
    auto file = H5File::open_read(path);
    ASSERT_TRUE(file.ok());
    address = static_cast<haddr_t>(file->dataset_layout("/offsets")->file_offset);
  }
  // The version-3 layout message: version, class 1 (contiguous), the data's address, its size (104 bytes).
  std::string layout = {3, 1};
  layout.append(reinterpret_cast<const char*>(&address), 8);
  const uint64_t size = 104;
  layout.append(reinterpret_cast<const char*>(&size), 8);
  std::string damaged = layout;
  damaged[0] = 1;
  patch_bytes(path, layout, damaged);

  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const absl::StatusOr<HostArray<int64_t>> read = file->read<int64_t>("/offsets");
  expect_error(read.status(), absl::StatusCode::kDataLoss,
               "dataset /offsets stores 0 bytes, its shape and type need 104");
  std::filesystem::remove(path);
}

// Fuzzing found it (optimizer.h5): a float datatype whose size field said 223 bytes instead of 4; libhdf5
// converted 576 such "floats" out of a 2,308-byte chunk (heap-buffer-overflow in H5VM_memcpyvv). Only the
// standard integer and IEEE float types are read now. Here the size says 5, which the file could hold (223
// is already refused as more than the file).
TEST(H5FileUntrusted, RefusesNumbersOfANonStandardType) {
  const std::string path = temp_path("float_223.h5");
  const std::vector<float> values(576, 1.5f);
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write("/momentum", {24, 24}, values.data(), {.checksum = true}).ok());
  }
  // The datatype message of an IEEE little-endian float: class and version, bit fields, size 4, then the
  // bit offset, precision 32, exponent at 23 of 8 bits, mantissa at 0 of 23 bits.
  const std::string float32("\x11\x20\x1f\x00\x04\x00\x00\x00\x00\x00\x20\x00\x17\x08\x00\x17", 16);
  std::string damaged = float32;
  damaged[4] = 5;
  patch_bytes(path, float32, damaged);

  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const absl::StatusOr<HostArray<float>> read = file->read<float>("/momentum");
  expect_error(read.status(), absl::StatusCode::kDataLoss, "dataset /momentum stores numbers of a type");
  std::filesystem::remove(path);
}

// Fuzzing found it (model.h5): a chunked dataset of (24, 96) floats whose chunk dimensions changed to
// (24, 589985); libhdf5 then read a chunk of 56 MB out of the 9,220 bytes stored (heap-buffer-overflow in
// H5VM_memcpyvv). Chunks must now match the shape, fit in the file and be stored at their size.
TEST(H5FileUntrusted, RefusesChunksThatDoNotMatchWhatIsStored) {
  const std::string path = temp_path("chunk_dims.h5");
  const std::vector<float> values(24 * 96, 0.5f);
  {
    auto file = H5File::create(path);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(file->write("/c_proj", {24, 96}, values.data(), {.checksum = true}).ok());
  }
  // The version-3 chunked layout message ends with the chunk's dimensions and the element size, 4 bytes each.
  const uint32_t chunk[] = {24, 96, 4}, damaged[] = {24, 589985, 4};
  patch_bytes(path, std::string(reinterpret_cast<const char*>(chunk), sizeof(chunk)),
              std::string(reinterpret_cast<const char*>(damaged), sizeof(damaged)));

  auto file = H5File::open_read(path);
  ASSERT_TRUE(file.ok());
  const absl::StatusOr<HostArray<float>> read = file->read<float>("/c_proj");
  expect_error(read.status(), absl::StatusCode::kDataLoss,
               "dataset /c_proj has chunks that do not match its shape or could not fit in the file");
  std::filesystem::remove(path);
}

// Fuzzing found it (model.h5): a chunked layout message whose version and class bytes were swapped (3, 2 ->
// 2, 3) reads, in the version-2 form, as a chunked layout whose chunk dimensions are 0; libhdf5 1.10 divides
// by them inside H5Dopen2 (SIGFPE in H5D__chunk_set_info) before any query can look. Every object header is
// now read first, as the group tree is walked at open. Both forms: the fuzzer's swap, and a 0 written into
// the version-3 message's chunk dimensions.
TEST(H5FileUntrusted, RefusesAZeroChunkDimensionBeforeLibhdf5DividesByIt) {
  const std::vector<float> values(2304, 0.5f);
  const uint32_t chunk[] = {2304, 4}, zero[] = {0, 4};
  // A 1-d chunked dataset's layout message: its header (type 8, 24 bytes, no flags), then version 3, class 2
  // (chunked), rank 2 (the dimension and the element size).
  const std::string message("\x08\x00\x18\x00\x00\x00\x00\x00\x03\x02\x02", 11);
  const std::string swapped("\x08\x00\x18\x00\x00\x00\x00\x00\x02\x03\x02", 11);
  struct Damage {
    std::string name, from, to;
  };
  for (const Damage& damage :
       {Damage{"swapped", message, swapped},
        Damage{"zero", std::string(reinterpret_cast<const char*>(chunk), sizeof(chunk)),
               std::string(reinterpret_cast<const char*>(zero), sizeof(zero))}}) {
    SCOPED_TRACE(damage.name);
    const std::string path = temp_path("zero_chunk_" + damage.name + ".h5");
    {
      auto file = H5File::create(path);
      ASSERT_TRUE(file.ok());
      ASSERT_TRUE(file->write("/c_proj", {2304}, values.data(), {.checksum = true}).ok());
    }
    patch_bytes(path, damage.from, damage.to);
    expect_error(H5File::open_read(path).status(), absl::StatusCode::kDataLoss,
                 "the object header of /c_proj is damaged (its chunk dimensions are 0 or do not fit in the "
                 "layout message)");
    std::filesystem::remove(path);
  }
}

// A file with two datasets under a group, whose local heaps and B-tree nodes the tests below damage.
std::string write_grouped(const std::string& name) {
  const std::string path = temp_path(name);
  auto file = H5File::create(path);
  EXPECT_TRUE(file.ok());
  const int64_t values[] = {1, 2};
  EXPECT_TRUE(file->write("/group/a", {2}, values).ok());
  EXPECT_TRUE(file->write("/group/b", {2}, values).ok());
  EXPECT_TRUE(file->close().ok());
  return path;
}

// Fuzzing found it (model.h5): a free block of the root group's local heap whose "next" pointed back into
// the list made libhdf5 1.10 follow it without end, allocating at each step (2 GB within seconds, in
// H5HL_protect under H5Lexists). The heap's free list is now followed at open, a bounded number of steps.
TEST(H5FileUntrusted, RefusesALoopInAGroupsLocalHeapBeforeLibhdf5FollowsIt) {
  const std::string path = write_grouped("heap_loop.h5");
  ASSERT_TRUE(H5File::open_read(path).ok());
  // A local heap: "HEAP", version, 3 reserved, data size, offset of the first free block, data address.
  // The first free block starts with the offset of the next: make it the block itself.
  std::string bytes = read_bytes(path);
  const size_t heap = bytes.find("HEAP");
  ASSERT_NE(heap, std::string::npos);
  uint64_t first_free = 0, data = 0;
  std::memcpy(&first_free, bytes.data() + heap + 16, 8);
  std::memcpy(&data, bytes.data() + heap + 24, 8);
  ASSERT_NE(first_free, 1u) << "the heap has a free block to damage";
  std::memcpy(bytes.data() + data + first_free, &first_free, 8);
  write_bytes(path, bytes);
  const absl::StatusOr<H5File> file = H5File::open_read(path);
  expect_error(file.status(), absl::StatusCode::kDataLoss, "is damaged (its local heap's free list loops)");
  EXPECT_NE(file.status().message().find(path), std::string::npos);
  std::filesystem::remove(path);
}

// What the walk must not refuse: a soft link (a symbol-table entry with no object header of its own) and a
// hard link to an object reached twice, as other writers may leave them.
TEST(H5FileUntrusted, SoftAndHardLinksPassTheGroupWalk) {
  const std::string path = write_grouped("links.h5");
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Lcreate_soft("/group/a", file, "soft", H5P_DEFAULT, H5P_DEFAULT), 0);
  ASSERT_GE(H5Lcreate_hard(file, "/group/b", file, "hard", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(file);
  auto opened = H5File::open_read(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->read<int64_t>("/hard")->values, (std::vector<int64_t>{1, 2}));
  std::filesystem::remove(path);
}

// The same class in a group's B-tree: a node that names itself as its child (raised to level 1 so that it
// has children that are nodes) is refused instead of being descended into for ever.
TEST(H5FileUntrusted, RefusesALoopInAGroupsBtree) {
  const std::string path = write_grouped("btree_loop.h5");
  // A group B-tree node: "TREE", type 0, level, entries used, two sibling addresses, then key 0, child 0.
  std::string bytes = read_bytes(path);
  const size_t node = bytes.find(std::string("TREE") + '\0');
  ASSERT_NE(node, std::string::npos);
  ASSERT_EQ(bytes[node + 5], 0) << "a leaf, whose children are symbol-table nodes";
  bytes[node + 5] = 1;
  const uint64_t self = node;
  std::memcpy(bytes.data() + node + 24 + 8, &self, 8);
  write_bytes(path, bytes);
  expect_error(H5File::open_read(path).status(), absl::StatusCode::kDataLoss,
               "is damaged (a B-tree node is reached twice)");
  std::filesystem::remove(path);
}

// Fuzzing found it (shards): a dataset's fill-value message whose flags changed from "constant" to "shared"
// (kept elsewhere, its body a pointer); libhdf5 1.10 looked for the file's shared-message table, which it
// does not have, and read through a null pointer inside H5Dopen2 (SIGSEGV under H5SM_get_fheap_addr). No
// message of an object header may be shared now, nor an attribute's datatype or dataspace.
TEST(H5FileUntrusted, RefusesSharedMessagesBeforeLibhdf5FollowsThem) {
  const int32_t tokens[] = {1, 2, 3, 4};
  for (const std::string damage : {"fill", "attribute"}) {
    SCOPED_TRACE(damage);
    const std::string path = temp_path("shared_" + damage + ".h5");
    {
      auto file = H5File::create(path);
      ASSERT_TRUE(file.ok());
      ASSERT_TRUE(file->write("/tokens", {4}, tokens).ok());
      ASSERT_TRUE(file->write_int_attribute("/tokens", "format", 2).ok());
    }
    ASSERT_TRUE(H5File::open_read(path).ok());
    if (damage == "fill") {
      // The fill-value message as H5File writes it: type 5, 8 bytes, flags 1 (constant); version 2,
      // allocation late, write if set, defined. The fuzzer's damage: flags 2 (shared), a body that reads as
      // a pointer.
      patch_bytes(path, std::string("\x05\x00\x08\x00\x01\x00\x00\x00\x02\x02\x02\x01", 12),
                  std::string("\x05\x00\x08\x00\x02\x00\x00\x00\x02\x01\x00\x01", 12));
    } else {
      // The attribute message of `format`, version 1 (version, reserved, three sizes, then the name), made
      // version 2 with its flags saying that its datatype is shared.
      std::string bytes = read_bytes(path);
      const size_t name = bytes.find(std::string("format") + '\0');
      ASSERT_NE(name, std::string::npos);
      ASSERT_EQ(bytes[name - 8], 1) << "a version-1 attribute message";
      bytes[name - 8] = 2;
      bytes[name - 7] = 1;
      write_bytes(path, bytes);
    }
    expect_error(H5File::open_read(path).status(), absl::StatusCode::kDataLoss,
                 "the object header of /tokens is damaged (a shared message");
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace nanoforge
