// Property: kiln pack never writes what kiln verify refuses. Random manifests — 0 to 400 extra
// files, sizes 0, 1, 63, 64, 65, 4096 and up to 64 KiB, compressible or not, page boundaries at 128
// members, one to three kernels sharing or not sharing code — go through the real packing path
// (plan_pack reads the files, build_archive writes), and every result must open, authenticate
// and verify at both levels. A run of empty files across a whole page (the case kiln 0.2.0 got
// wrong) is always among them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/archive_writer.hpp"
#include "core/error.hpp"
#include "pack_plan.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class PackProperty : public ::testing::Test {
 protected:
  PrivateKey key = PrivateKey::generate();
  TrustSet trust = test::trust_of({&key});

  void write(const std::string& dir, const std::string& name, const std::string& content) {
    std::size_t slash = name.find('/');
    if (slash != std::string::npos) ::mkdir((dir + "/" + name.substr(0, slash)).c_str(), 0755);
    std::ofstream(dir + "/" + name, std::ios::binary) << content;
  }

  // One random package in a fresh folder; returns its kiln.toml path.
  std::string random_package(std::mt19937& rng, int extra_files, bool empty_run) {
    std::string dir = test::make_temp_dir();
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    std::string toml = "[package]\nname = \"prop\"\nkernel_revision = \"r" + std::to_string(rng() % 1000) +
                       "\"\nsequence = " + std::to_string(1 + pick(50)) + "\n\n";
    int kernels = 1 + pick(3);
    const char* targets[] = {"sm_80", "sm_90", "sm_90a"};
    for (int k = 0; k < kernels; ++k) {
      std::string target = targets[pick(3)];
      std::string arch = target.rfind("sm_90a", 0) == 0 ? "compute_90a" : "compute_" + target.substr(3);
      // Kernels share one PTX file half the time.
      std::string code = pick(2) == 0 ? "code/shared_" + target + ".ptx" : "code/k" + std::to_string(k) + ".ptx";
      write(dir, code, test::small_ptx(target));
      write(dir, "src/k" + std::to_string(k) + ".cu", "// kernel " + std::to_string(k) + "\n");
      toml += "[[kernel]]\nname = \"k" + std::to_string(k) + "\"\nentry = \"add_f32\"\nbackend = \"cuda\"\n" +
              "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }, { name = \"n\", type = \"i32\" }]\n" +
              "sources = [\"src/k" + std::to_string(k) + ".cu\"]\n" + (pick(2) ? "ir = [\"" + code + "\"]\n" : "") +
              "code = [{ arch = \"" + arch + "\", file = \"" + code + "\" }]\n\n";
    }
    toml += "[files]\nextra = [";
    const std::size_t sizes[] = {0, 1, 63, 64, 65, 4096};
    for (int i = 0; i < extra_files; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "d%d/f%04d.bin", i % 7, i);
      std::size_t size = empty_run && i < 140 ? 0 : (pick(4) == 0 ? static_cast<std::size_t>(pick(64 << 10)) : sizes[pick(6)]);
      std::string content(size, 'a');
      if (pick(2)) {
        for (char& c : content) c = static_cast<char>(rng());  // incompressible: stored raw
      }
      write(dir, name, content);
      toml += std::string(i ? ", " : "") + "\"" + name + "\"";
    }
    toml += "]\n";
    write(dir, "kiln.toml", toml);
    return dir + "/kiln.toml";
  }
};

TEST_F(PackProperty, EveryPackedArchiveVerifies) {
  const int counts[] = {0, 1, 126, 127, 128, 140, 254, 255, 256, 300, 400};
  std::mt19937 rng(20261201);
  int packed = 0;
  for (int round = 0; round < 14; ++round) {
    int extra = round < 11 ? counts[round] : static_cast<int>(rng() % 400);
    bool empty_run = round == 5 || round == 9;  // 140 empty files: pages of nothing but empty members
    std::string manifest = random_package(rng, extra, empty_run);
    SCOPED_TRACE(manifest + " (" + std::to_string(extra) + " extra files)");
    cli::PackPlan plan = cli::plan_pack(manifest, 2);
    WriteOptions options;
    options.level = 1 + static_cast<int>(rng() % 9);
    options.threads = 2;
    std::vector<std::uint8_t> bytes = build_archive(plan.identity, std::move(plan.members), {Signer{&key, "prop", 0}}, options);
    ReadOptions read;
    read.policy = TrustPolicy{&trust, 1};
    try {
      std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), read);
      a->verify_all(2, false, nullptr);
      a->verify_all(2, true, nullptr);
      for (const std::string& name : a->kernel_names()) EXPECT_EQ(a->kernel(name).name, name);
      ++packed;
    } catch (const Failure& e) {
      ADD_FAILURE() << "kiln wrote an archive it then refuses: " << e.what();
    }
  }
  EXPECT_EQ(packed, 14);
}

}  // namespace
}  // namespace kiln
