// kiln pack's planning step: files read relative to the manifest, code objects checked
// against the arch the manifest claims, links and reserved names refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/npy.hpp"
#include "pack_plan.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class PackPlanTest : public ::testing::Test {
 protected:
  // One kernel naming only its code, the kernel table last so tests can append to it (the
  // refusals below name its lines and columns).
  std::string kernel_only_manifest(const std::string& code_path) {
    return "[package]\nname = \"" + id.package + "\"\nkernel_revision = \"" + id.kernel_revision + "\"\nsequence = " +
           std::to_string(id.sequence) + "\n\n[[kernel]]\nname = \"add\"\nentry = \"add_f32\"\nbackend = \"cuda\"\n" +
           "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }, { name = \"n\", type = \"i32\" }]\n" +
           "code = [{ arch = \"compute_90\", file = \"" + code_path + "\" }]\n";
  }
  void SetUp() override { dir = test::make_temp_dir(); }
  void write(const std::string& name, const std::string& content) {
    std::string path = dir + "/" + name;
    auto slash = name.rfind('/');
    if (slash != std::string::npos) ::mkdir((dir + "/" + name.substr(0, slash)).c_str(), 0755);
    std::ofstream(path, std::ios::binary) << content;
  }
  std::string expect_error(Errc code) {
    try {
      cli::plan_pack(dir + "/kiln.toml");
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "plan_pack accepted the manifest";
    return "";
  }
  std::string dir;
  PackageIdentity id = test::default_identity();
};

TEST_F(PackPlanTest, ReadsEveryNamedFileAndRecordsTheToolchain) {
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  write("k.ptx", test::small_ptx("sm_90"));
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml");
  // kiln.toml, k.ptx, kiln/observed-toolchain.toml, kiln/kernels.bin, the kernel's record
  ASSERT_EQ(plan.members.size(), 5u);
  bool saw_code = false;
  for (const MemberInput& m : plan.members) {
    if (m.path == "k.ptx") {
      saw_code = true;
      EXPECT_EQ(m.arch, "compute_90");
      EXPECT_EQ(m.kind, format::CodeKind::ptx);
    }
  }
  EXPECT_TRUE(saw_code);
}

// Small inputs are left for the writer's workers to read (no mapping per file); the plan reads
// a code object once to check its target and keeps the digest of what it read, so a code object
// rewritten between the check and the pack is refused, not packed with the plan's arch. A file
// of 2 MiB or more is mapped.
TEST_F(PackPlanTest, SmallInputsAreReadWhenPackedAndACodeObjectChangedSinceItsCheckIsRefused) {
  std::string manifest = test::small_manifest(id, "k.ptx", {"big.bin"});
  write("kiln.toml", manifest);
  std::string ptx = test::small_ptx("sm_90");
  write("k.ptx", ptx);
  write("src/add.cu", "__global__ void add_f32(float* x, int n) {}\n");
  write("tests/vector.bin", "a blob");
  write("big.bin", std::string(2u << 20, 'b'));
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml", 2);
  auto member = [&](const std::string& path) -> MemberInput& {
    for (MemberInput& m : plan.members) {
      if (m.path == path) return m;
    }
    throw std::runtime_error("no member " + path);
  };
  ASSERT_TRUE(member("k.ptx").file.has_value());
  EXPECT_EQ(member("k.ptx").file->path, dir + "/k.ptx");
  EXPECT_EQ(member("k.ptx").file->size, ptx.size());
  EXPECT_EQ(member("k.ptx").file->checked, sha256(ptx.data(), ptx.size()));
  EXPECT_EQ(member("k.ptx").mapped, nullptr);
  ASSERT_TRUE(member("src/add.cu").file.has_value());
  EXPECT_FALSE(member("src/add.cu").file->checked.has_value()) << "a source is not read at planning";
  EXPECT_FALSE(member("big.bin").file.has_value());
  ASSERT_NE(member("big.bin").mapped, nullptr);
  EXPECT_EQ(member("big.bin").size(), 2u << 20);

  std::string changed = ptx;
  changed.replace(changed.find("sm_90"), 5, "sm_80");  // what the plan's arch no longer says
  write("k.ptx", changed);
  PrivateKey key = PrivateKey::generate();
  try {
    write_archive_file(dir + "/out.kiln", plan.identity, plan.members, {Signer{&key, "t", 0}}, {});
    ADD_FAILURE() << "a code object changed after its check was packed";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::io) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir + "/k.ptx: changed while kiln pack read it"), std::string::npos) << e.what();
  }
  EXPECT_NE(::access((dir + "/out.kiln").c_str(), F_OK), 0) << "nothing is left where the archive would go";
  write("k.ptx", ptx);
  write_archive_file(dir + "/out.kiln", plan.identity, plan.members, {Signer{&key, "t", 0}}, {});
  ReadOptions options;
  TrustSet trust = test::trust_of({&key});
  options.policy = TrustPolicy{&trust, 1};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(dir + "/out.kiln", options);
  std::vector<std::uint8_t> code = a->read_member("k.ptx");
  EXPECT_EQ(std::string(code.begin(), code.end()), ptx);
  EXPECT_EQ(a->read_member("big.bin").size(), 2u << 20);
}

TEST_F(PackPlanTest, ArchClaimThatTheFileContradictsIsRefusedWithItsLocation) {
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  write("k.ptx", test::small_ptx("sm_80"));  // claimed compute_90 in the manifest
  std::string why = expect_error(Errc::code_object);
  EXPECT_NE(why.find("kiln.toml:11:9: kernel 'add' claims arch 'compute_90' for 'k.ptx' but the file is built for compute_80"),
            std::string::npos)
      << why;
}

TEST_F(PackPlanTest, NotACodeObjectIsRefused) {
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  write("k.ptx", "just some text");
  std::string why = expect_error(Errc::code_object);
  EXPECT_NE(why.find("'k.ptx': not a cubin, PTX, fatbin"), std::string::npos) << why;
}

TEST_F(PackPlanTest, MissingFileNamesTheManifestLine) {
  write("kiln.toml", kernel_only_manifest("missing.ptx"));
  std::string why = expect_error(Errc::io);
  EXPECT_NE(why.find("kiln.toml:11:39: "), std::string::npos) << why;
  EXPECT_NE(why.find("missing.ptx: cannot open"), std::string::npos) << why;
}

TEST_F(PackPlanTest, SymbolicLinkIsRefused) {
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  write("real.ptx", test::small_ptx("sm_90"));
  ASSERT_EQ(::symlink("real.ptx", (dir + "/k.ptx").c_str()), 0);
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("is a symbolic link"), std::string::npos) << why;
}

TEST_F(PackPlanTest, DeviceFileIsRefused) {
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  ASSERT_EQ(::symlink("/dev/zero", (dir + "/k.ptx").c_str()), 0);  // refused as a link first
  expect_error(Errc::manifest);
  ::unlink((dir + "/k.ptx").c_str());
  ASSERT_EQ(::mkfifo((dir + "/k.ptx").c_str(), 0644), 0);
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("not a regular file"), std::string::npos) << why;
}

// The two functions kiln pack reads its inputs with (the manifest: read_regular_file_nofollow;
// every file it names: MappedFile::open_regular_nofollow), given real character devices.
TEST(PackInputFiles, CharacterDevicesAreRefusedAsNotRegularFiles) {
  for (const std::string device : {"/dev/null", "/dev/zero"}) {
    struct stat st {};
    ASSERT_EQ(::lstat(device.c_str(), &st), 0) << device;
    ASSERT_TRUE(S_ISCHR(st.st_mode)) << device << " is not a character device here";
    try {
      read_regular_file_nofollow(device, 1 << 20);
      ADD_FAILURE() << "read_regular_file_nofollow read " << device;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_EQ(std::string(e.what()), device + ": not a regular file");
    }
    try {
      MappedFile::open_regular_nofollow(device, 1 << 20);
      ADD_FAILURE() << "MappedFile::open_regular_nofollow mapped " << device;
    } catch (const Failure& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_EQ(std::string(e.what()), device + ": not a regular file");
    }
  }
}

// The same through kiln pack's planning step: a device node (the same as /dev/null) where the
// manifest names its code, and as the manifest itself. Making one needs CAP_MKNOD.
TEST_F(PackPlanTest, DeviceNodeInThePackFolderIsRefused) {
  if (::mknod((dir + "/k.ptx").c_str(), S_IFCHR | 0644, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "cannot make a device node here (" << std::strerror(errno) << "); "
                 << "PackInputFiles.CharacterDevicesAreRefusedAsNotRegularFiles covers the reads";
  }
  write("kiln.toml", kernel_only_manifest("k.ptx"));
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find(dir + "/k.ptx: not a regular file"), std::string::npos) << why;

  ::unlink((dir + "/kiln.toml").c_str());
  ASSERT_EQ(::mknod((dir + "/kiln.toml").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0) << std::strerror(errno);
  try {
    cli::plan_pack(dir + "/kiln.toml");
    ADD_FAILURE() << "plan_pack read a device as its manifest";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/kiln.toml: not a regular file"), std::string::npos) << e.what();
  }
}

TEST_F(PackPlanTest, ReservedNamesAreRefused) {
  std::string manifest = kernel_only_manifest("k.ptx") + "sources = [\"kiln/observed-toolchain.toml\"]\n";
  write("kiln.toml", manifest);
  write("k.ptx", test::small_ptx("sm_90"));
  write("kiln/observed-toolchain.toml", "forged");
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("is reserved"), std::string::npos) << why;
}

TEST_F(PackPlanTest, TestVectorOfTheWrongDtypeIsRefused) {
  std::string manifest = kernel_only_manifest("k.ptx") +
                         "[[kernel.shape]]\nname = \"n4\"\nvalues = { n = 4 }\ngrid = [1]\nblock = [4]\n"
                         "[[kernel.test]]\nshape = \"n4\"\ninputs = { x = \"x.npy\" }\noutputs = { x = \"x.npy\" }\n";
  write("kiln.toml", manifest);
  write("k.ptx", test::small_ptx("sm_90"));
  double values[4] = {1, 2, 3, 4};
  std::vector<std::uint8_t> npy = write_npy(ScalarType::f64, {4}, values);
  write("x.npy", std::string(npy.begin(), npy.end()));
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("test vector 'x.npy' holds f64 but parameter 'x' of kernel 'add' points to f32"), std::string::npos) << why;
  float floats[4] = {1, 2, 3, 4};
  npy = write_npy(ScalarType::f32, {2, 2}, floats);
  write("x.npy", std::string(npy.begin(), npy.end()));
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml");
  EXPECT_EQ(plan.manifest.kernels.at(0).tests.size(), 1u);
  bool stored = false;
  for (const MemberInput& m : plan.members) stored = stored || (m.path == "x.npy" && m.role == format::Role::testdata);
  EXPECT_TRUE(stored) << "the vector is stored once, as testdata";
}

TEST_F(PackPlanTest, Bf16AndFp8VectorsHoldRawBitsAndTheirScalarsTakeTestValues) {
  auto manifest = [&](const std::string& dtype, const std::string& scalar, const std::string& value) {
    return "[package]\nname = \"p\"\nkernel_revision = \"r\"\nsequence = 1\n\n[[kernel]]\nname = \"scale\"\n"
           "entry = \"scale\"\nbackend = \"cuda\"\nparams = [{ name = \"x\", type = \"ptr\", dtype = \"" + dtype +
           "\" }, { name = \"alpha\", type = \"" + scalar + "\" }, { name = \"n\", type = \"i32\" }]\n"
           "code = [{ arch = \"compute_90\", file = \"k.ptx\" }]\n"
           "[[kernel.shape]]\nname = \"n4\"\nvalues = { n = 4 }\ngrid = [1]\nblock = [4]\n"
           "[[kernel.test]]\nshape = \"n4\"\nvalues = { alpha = " + value + " }\ninputs = { x = \"x.npy\" }\n"
           "outputs = { x = \"x.npy\" }\n";
  };
  write("k.ptx", test::small_ptx("sm_90"));
  std::uint16_t bf16[4] = {0x3F80, 0x4000, 0x4040, 0x4080};
  std::vector<std::uint8_t> npy = write_npy(ScalarType::u16, {4}, bf16);
  write("x.npy", std::string(npy.begin(), npy.end()));
  write("kiln.toml", manifest("bf16", "bf16", "0.5"));
  EXPECT_EQ(cli::plan_pack(dir + "/kiln.toml").manifest.kernels.at(0).tests.at(0).float_values.at(0).second, 0.5);
  std::uint16_t halves[4] = {0x3C00, 0x4000, 0x4200, 0x4400};
  npy = write_npy(ScalarType::f16, {4}, halves);
  write("x.npy", std::string(npy.begin(), npy.end()));
  std::string why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("holds f16 but parameter 'x' of kernel 'scale' points to bf16 (a bf16 vector holds the raw bits as <u2)"),
            std::string::npos) << why;
  std::uint8_t fp8[4] = {0x38, 0x40, 0x44, 0x48};
  npy = write_npy(ScalarType::u8, {4}, fp8);
  write("x.npy", std::string(npy.begin(), npy.end()));
  write("kiln.toml", manifest("f8e4m3", "f16", "-2.5"));
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml");
  EXPECT_EQ(plan.manifest.kernels.at(0).params.at(0).type, ScalarType::f8e4m3);
  write("kiln.toml", manifest("f8e5m2", "f8e4m3", "448"));
  EXPECT_EQ(cli::plan_pack(dir + "/kiln.toml").manifest.kernels.at(0).params.at(1).type, ScalarType::f8e4m3);
  write("kiln.toml", manifest("f8e5m2", "f8e4m3", "480.0"));
  why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("test value 'alpha' = 480.000000 is outside the f8e4m3 range (it would round to infinity or NaN)"),
            std::string::npos) << why;
  write("kiln.toml", manifest("f8e5m2", "f16", "70000"));
  why = expect_error(Errc::manifest);
  EXPECT_NE(why.find("is outside the f16 range"), std::string::npos) << why;
}

TEST_F(PackPlanTest, AmdTargetIdClaimsAreCheckedAgainstTheBundle) {
#ifndef KILN_AMD_OBJECTS
  GTEST_SKIP() << "hipcc was not found when this build was configured";
#else
  write("scale.co", test::read_text_file(std::string(KILN_AMD_OBJECTS) + "/scale.gfx90a_xnack-.co"));
  std::string manifest = "[package]\nname = \"p\"\nkernel_revision = \"r\"\nsequence = 1\n[[kernel]]\nname = \"k\"\n"
                         "entry = \"scale_f32\"\nbackend = \"hip\"\ncode = [{ arch = \"gfx90a:xnack+\", file = \"scale.co\" }]\n";
  write("kiln.toml", manifest);
  std::string why = expect_error(Errc::code_object);
  EXPECT_NE(why.find("claims arch 'gfx90a:xnack+' for 'scale.co' but the file is built for gfx90a:xnack-"), std::string::npos) << why;
  manifest.replace(manifest.find("gfx90a:xnack+"), 13, "gfx90a:xnack-");
  write("kiln.toml", manifest);
  EXPECT_EQ(cli::plan_pack(dir + "/kiln.toml").members.size(), 5u);
  const std::string hip = "backend = \"hip\"";
  manifest.replace(manifest.find(hip), hip.size(), "backend = \"cuda\"");
  write("kiln.toml", manifest);
  why = expect_error(Errc::code_object);
  EXPECT_NE(why.find("is hip code but kernel 'k' has backend cuda"), std::string::npos) << why;
#endif
}

TEST(Npy, RoundTripAndRefusals) {
  float v[6] = {1.5f, -2, 3, 4, 5, 6};
  std::vector<std::uint8_t> bytes = write_npy(ScalarType::f32, {2, 3}, v);
  NpyArray a = parse_npy(ByteView(bytes), "a.npy");
  EXPECT_EQ(a.dtype, ScalarType::f32);
  ASSERT_EQ(a.shape.size(), 2u);
  EXPECT_EQ(a.shape[1], 3u);
  EXPECT_EQ(a.count(), 6u);
  EXPECT_DOUBLE_EQ(npy_element(a, 0), 1.5);
  EXPECT_DOUBLE_EQ(npy_element(a, 1), -2);
  std::vector<std::uint8_t> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_THROW(parse_npy(ByteView(cut), "cut.npy"), Failure);
  std::string fortran(bytes.begin(), bytes.end());
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THROW(parse_npy(ByteView(reinterpret_cast<const std::uint8_t*>(fortran.data()), fortran.size()), "f.npy"), Failure);
  std::string big_endian(bytes.begin(), bytes.end());
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  EXPECT_THROW(parse_npy(ByteView(reinterpret_cast<const std::uint8_t*>(big_endian.data()), big_endian.size()), "b.npy"), Failure);
}

TEST_F(PackPlanTest, RealNvccOutputPacksAndAWrongClaimIsRefused) {
#ifndef KILN_EXAMPLE_CUDA_DIR
  GTEST_SKIP() << "nvcc was not found when this build was configured";
#else
  std::string example = KILN_EXAMPLE_CUDA_DIR;
  for (const char* f : {"kiln.toml", "matmul_relu.cu", "matmul_relu.sm_80.cubin", "matmul_relu.sm_90a.cubin",
                        "matmul_relu.compute_90.ptx", "m256n256k256.a.npy", "m256n256k256.b.npy",
                        "m256n256k256.c.expected.npy"}) {
    write(f, test::read_text_file(example + "/" + f));
  }
  cli::PackPlan plan = cli::plan_pack(dir + "/kiln.toml");
  EXPECT_EQ(plan.manifest.kernels.at(0).code.size(), 3u);
  // Claim sm_90a for the sm_80 cubin: the file's own e_flags and ptxas note say otherwise.
  std::string manifest = test::read_text_file(example + "/kiln.toml");
  std::string from = "{ arch = \"sm_80\", file = \"matmul_relu.sm_80.cubin\" }";
  std::string to = "{ arch = \"sm_90\", file = \"matmul_relu.sm_80.cubin\" }";
  manifest.replace(manifest.find(from), from.size(), to);
  write("kiln.toml", manifest);
  std::string why = expect_error(Errc::code_object);
  EXPECT_NE(why.find("claims arch 'sm_90' for 'matmul_relu.sm_80.cubin' but the file is built for sm_80"), std::string::npos) << why;
#endif
}

}  // namespace
}  // namespace kiln
