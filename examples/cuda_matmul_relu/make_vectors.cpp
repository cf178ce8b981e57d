// Writes the example's test vectors: A and B (256 x 256, float32, from a fixed seed) and the
// expected C = relu(A x B) computed on the CPU in double precision, as .npy files.
// usage: make_vectors OUT_DIR [M N K]
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/npy.hpp"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: %s OUT_DIR [M N K]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const int m = argc == 5 ? std::stoi(argv[2]) : 256, n = argc == 5 ? std::stoi(argv[3]) : 256,
            k = argc == 5 ? std::stoi(argv[4]) : 256;
  std::uint64_t state = 0x6b696c6eull;  // "kiln": the same vectors on every machine
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  };
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n);
  for (float& v : a) v = next();
  for (float& v : b) v = next();
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int p = 0; p < k; ++p) acc += static_cast<double>(a[static_cast<size_t>(i) * k + p]) * b[static_cast<size_t>(p) * n + j];
      c[static_cast<size_t>(i) * n + j] = static_cast<float>(acc > 0 ? acc : 0);
    }
  }
  const std::string prefix = "m" + std::to_string(m) + "n" + std::to_string(n) + "k" + std::to_string(k);
  auto save = [&](const std::string& name, const std::vector<float>& v, std::uint64_t rows, std::uint64_t cols) {
    std::vector<std::uint8_t> bytes = kiln::write_npy(kiln::ScalarType::f32, {rows, cols}, v.data());
    std::ofstream(out + "/" + prefix + "." + name + ".npy", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  save("a", a, m, k);
  save("b", b, k, n);
  save("c.expected", c, m, n);
  return 0;
}
