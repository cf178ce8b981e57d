// Writes the example's test vector: `in` (rows x cols float32, from a fixed seed) and the
// expected out[r][c] = in[r][c] + in[r][c ^ 32] (0 past the last column), as .npy files.
// usage: make_tma_vectors OUT_DIR [ROWS COLS]
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/npy.hpp"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: %s OUT_DIR [ROWS COLS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int rows = argc == 4 ? std::stoi(argv[2]) : 70, cols = argc == 4 ? std::stoi(argv[3]) : 100;
  std::uint64_t state = 0x746d61ull;  // "tma": the same vectors on every machine
  std::vector<float> in(static_cast<size_t>(rows) * cols), out(in.size());
  for (float& v : in) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<int>(state >> 40) % 1000) / 8.0f;  // exact in float: sums are exact
  }
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      int p = c ^ 32;
      out[static_cast<size_t>(r) * cols + c] = in[static_cast<size_t>(r) * cols + c] + (p < cols ? in[static_cast<size_t>(r) * cols + p] : 0.0f);
    }
  }
  const std::string prefix = dir + "/r" + std::to_string(rows) + "c" + std::to_string(cols);
  auto save = [&](const std::string& name, const std::vector<float>& v) {
    std::vector<std::uint8_t> bytes = kiln::write_npy(kiln::ScalarType::f32, {std::uint64_t(rows), std::uint64_t(cols)}, v.data());
    std::ofstream(prefix + "." + name + ".npy", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  save("in", in);
  save("out.expected", out);
  return 0;
}
