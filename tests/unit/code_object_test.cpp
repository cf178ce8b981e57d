// Code-object readers: real nvcc output where the build had nvcc, and the bit-level rules
// on headers built here where the rule itself is the subject.
#include <gtest/gtest.h>

#include <cstring>

#include "core/code_object.hpp"
#include "core/held_bytes.hpp"
#include "core/error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

#ifdef KILN_EXAMPLE_CUDA_DIR
std::vector<std::uint8_t> example_file(const std::string& name) {
  std::string text = test::read_text_file(std::string(KILN_EXAMPLE_CUDA_DIR) + "/" + name);
  return std::vector<std::uint8_t>(text.begin(), text.end());
}
#endif

TEST(CudaCodeObjects, NvccCubinsAndPtxReportTheirRealArch) {
#ifndef KILN_EXAMPLE_CUDA_DIR
  GTEST_SKIP() << "nvcc was not found when this build was configured; no real cubins to read";
#else
  struct Case {
    const char* file;
    format::CodeKind kind;
    const char* target;
  } cases[] = {
      {"matmul_relu.sm_80.cubin", format::CodeKind::cubin, "sm_80"},
      {"matmul_relu.sm_90a.cubin", format::CodeKind::cubin, "sm_90a"},
      {"matmul_relu.compute_90.ptx", format::CodeKind::ptx, "compute_90"},
  };
  for (const Case& c : cases) {
    std::vector<std::uint8_t> bytes = example_file(c.file);
    ASSERT_FALSE(bytes.empty()) << c.file;
    CodeObjectInfo info = inspect_code_object(ByteView(bytes), c.file);
    EXPECT_EQ(info.backend, format::Vendor::cuda) << c.file;
    EXPECT_EQ(info.kind, c.kind) << c.file;
    ASSERT_EQ(info.targets.size(), 1u) << c.file;
    EXPECT_EQ(info.targets[0], c.target) << c.file;
  }
#endif
}

TEST(CudaCodeObjects, TruncatedCubinIsRefusedNotCrashed) {
#ifndef KILN_EXAMPLE_CUDA_DIR
  GTEST_SKIP() << "nvcc was not found when this build was configured";
#else
  std::vector<std::uint8_t> bytes = example_file("matmul_relu.sm_90a.cubin");
  // Every prefix is either refused with a kiln::Failure or still read as sm_90a (the header
  // and the note come first); never a crash, never another arch.
  std::size_t refused = 0;
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    try {
      CodeObjectInfo info = inspect_code_object(ByteView(cut), "cut");
      EXPECT_EQ(info.targets.at(0), "sm_90a") << "prefix of " << n << " bytes";
    } catch (const Failure&) {
      ++refused;
    }
  }
  EXPECT_GE(refused, 64u) << "prefixes shorter than the ELF header must all be refused";
#endif
}

TEST(CudaCodeObjects, PtxTargetsAndVersion) {
  std::string ptx = test::small_ptx("sm_90a");
  CodeObjectInfo info = inspect_ptx(ByteView(reinterpret_cast<const std::uint8_t*>(ptx.data()), ptx.size()), "k.ptx");
  EXPECT_EQ(info.targets.at(0), "compute_90a");
  EXPECT_EQ(info.detail, "PTX ISA 8.0");
  std::string not_ptx = "hello .version but no target";
  EXPECT_THROW(inspect_code_object(ByteView(reinterpret_cast<const std::uint8_t*>(not_ptx.data()), not_ptx.size()), "x"), Failure);
}

// A minimal ELF64 header: enough for the readers, which look at the header alone when
// there are no sections.
std::vector<std::uint8_t> elf_header(std::uint16_t machine, std::uint8_t os_abi, std::uint8_t abi_version, std::uint32_t flags) {
  std::vector<std::uint8_t> h(64, 0);
  std::memcpy(h.data(), "\x7f" "ELF", 4);
  h[4] = 2;
  h[5] = 1;
  h[6] = 1;
  h[7] = os_abi;
  h[8] = abi_version;
  h[16] = 2;
  h[18] = static_cast<std::uint8_t>(machine);
  h[19] = static_cast<std::uint8_t>(machine >> 8);
  for (int i = 0; i < 4; ++i) h[48 + i] = static_cast<std::uint8_t>(flags >> (8 * i));
  return h;
}

TEST(AmdCodeObjects, TargetIdFromFlags) {
  struct Case {
    std::uint32_t flags;
    const char* id;
  } cases[] = {
      {0x3f | 0x300, "gfx90a:xnack+"},
      {0x3f | 0x200, "gfx90a:xnack-"},
      {0x3f | 0x100, "gfx90a"},
      {0x3f | 0xc00 | 0x200, "gfx90a:sramecc+:xnack-"},
      {0x30 | 0x400 | 0x100, "gfx908"},
      {0x41, "gfx1100"},
      {0x4c | 0x800 | 0x300, "gfx942:sramecc-:xnack+"},
      {0x54, "gfx11-generic"},
      {0x51 | 0x200, "gfx9-generic:xnack-"},
  };
  for (const Case& c : cases) {
    std::vector<std::uint8_t> h = elf_header(0xE0, 64, 3, c.flags);
    CodeObjectInfo info = inspect_code_object(ByteView(h), "k.co");
    EXPECT_EQ(info.targets.at(0), c.id);
    EXPECT_EQ(info.detail, "AMDGPU code object v5");
  }
  EXPECT_THROW(inspect_code_object(ByteView(elf_header(0xE0, 0, 3, 0x3f)), "k.co"), Failure);   // not HSA
  EXPECT_THROW(inspect_code_object(ByteView(elf_header(0xE0, 64, 1, 0x3f)), "k.co"), Failure);  // code object v3
  EXPECT_THROW(inspect_code_object(ByteView(elf_header(0xE0, 64, 3, 0xff)), "k.co"), Failure);  // unknown mach
  EXPECT_THROW(inspect_code_object(ByteView(elf_header(62, 0, 0, 0)), "x86.o"), Failure);       // x86-64 ELF
}

TEST(CudaCodeObjects, CubinFlagEncodingsOfBothElfAbis) {
  // ELF ABI v8 (CUDA 13) keeps the SM in bits 8-15; earlier ABIs in bits 0-7.
  std::vector<std::uint8_t> v8 = elf_header(190, 65, 8, 0x06005a04);
  EXPECT_EQ(inspect_code_object(ByteView(v8), "a").targets.at(0), "sm_90");
  std::vector<std::uint8_t> v7 = elf_header(190, 51, 7, 0x0050055a);
  EXPECT_EQ(inspect_code_object(ByteView(v7), "b").targets.at(0), "sm_90");
  // The flags of Triton 3.6's sm_90a cubin (ptxas 12.x): EF_CUDA_ACCELERATORS_V1 (0x800) set.
  std::vector<std::uint8_t> triton = elf_header(190, 51, 7, 0x005a0d5a);
  EXPECT_EQ(inspect_code_object(ByteView(triton), "c").targets.at(0), "sm_90a");
  std::vector<std::uint8_t> v8a = elf_header(190, 65, 8, 0x0600640a);  // bit 3: sm_100a in ABI v8
  EXPECT_EQ(inspect_code_object(ByteView(v8a), "d").targets.at(0), "sm_100a");
}

// A member of which the first `head` and last `tail` bytes are held, as a full verification holds it.
HeldBytes held_ends(const std::vector<std::uint8_t>& bytes, std::size_t head, std::size_t tail) {
  HeldBytes held;
  held.reset(bytes.size());
  std::memcpy(held.add(0, head), bytes.data(), head);
  std::memcpy(held.add(bytes.size() - tail, tail), bytes.data() + bytes.size() - tail, tail);
  return held;
}

TEST(HeldCodeObjects, ACubinToldFromItsEndsGetsTheWholeFilesAnswerOrNone) {
  // The section table at the end, the note in the first bytes: told from 8 KiB at each end.
  std::vector<std::uint8_t> cubin = test::synthetic_cubin(90, "sm_90a", 100000);
  ASSERT_EQ(inspect_code_object(ByteView(cubin), "k.cubin").targets.at(0), "sm_90a");
  std::optional<CodeObjectInfo> held = inspect_held_code_object(held_ends(cubin, 8192, 8192), "k.cubin");
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->targets.at(0), "sm_90a");
  EXPECT_EQ(held->detail, "cubin, ELF ABI v8");
  // The table 20 KiB before the end: not held, so no answer (the caller reads the whole member).
  std::vector<std::uint8_t> between = test::synthetic_cubin(90, "sm_90a", 100000, 20000);
  ASSERT_EQ(inspect_code_object(ByteView(between), "k.cubin").targets.at(0), "sm_90a");
  EXPECT_FALSE(inspect_held_code_object(held_ends(between, 8192, 8192), "k.cubin").has_value());
  // A note that contradicts e_flags: the same refusal from the ends as from the whole.
  std::vector<std::uint8_t> lying = test::synthetic_cubin(90, "sm_80", 100000);
  std::string whole, ends;
  try {
    inspect_code_object(ByteView(lying), "k.cubin");
  } catch (const Failure& e) {
    whole = e.what();
  }
  try {
    inspect_held_code_object(held_ends(lying, 8192, 8192), "k.cubin");
  } catch (const Failure& e) {
    ends = e.what();
  }
  EXPECT_EQ(whole, "k.cubin: e_flags say sm_90 but the ptxas note says sm_80");
  EXPECT_EQ(ends, whole);
  // A table said to lie past the file's end is the whole file's refusal too, not "not held".
  std::vector<std::uint8_t> past = cubin;
  past[40 + 2] = 0x7f;  // e_shoff far beyond the member
  EXPECT_THROW(inspect_code_object(ByteView(past), "k.cubin"), Failure);
  EXPECT_THROW(inspect_held_code_object(held_ends(past, 8192, 8192), "k.cubin"), Failure);
}

TEST(HeldCodeObjects, HeldBytesServeOnlyWhatWasCopied) {
  std::vector<std::uint8_t> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i);
  HeldBytes held = held_ends(bytes, 100, 50);
  EXPECT_EQ(held.sub(10, 20).data[0], 10);
  EXPECT_EQ(held.sub(950, 50).data[49], static_cast<std::uint8_t>(999));
  EXPECT_THROW(held.sub(90, 20), NotHeld);   // runs past the head
  EXPECT_THROW(held.sub(500, 1), NotHeld);   // between
  EXPECT_THROW(held.sub(990, 20), Failure);  // past the member's end: a refusal, as for the whole member
  try {
    held.sub(990, 20);
  } catch (const Failure& e) {
    EXPECT_STREQ(e.what(), "range [990, +20) lies outside 1000 bytes");
  }
}

}  // namespace
}  // namespace kiln
