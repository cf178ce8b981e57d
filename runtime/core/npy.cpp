#include "core/npy.hpp"

#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/float_formats.hpp"

namespace kiln {
namespace {

struct Descr {
  const char* text;
  ScalarType type;
};
// '|' marks single-byte types, '<' little-endian. bfloat16 has no NumPy dtype of its own.
constexpr Descr kDescrs[] = {{"|i1", ScalarType::i8},  {"<i2", ScalarType::i16}, {"<i4", ScalarType::i32},
                             {"<i8", ScalarType::i64}, {"|u1", ScalarType::u8},  {"<u2", ScalarType::u16},
                             {"<u4", ScalarType::u32}, {"<u8", ScalarType::u64}, {"<f2", ScalarType::f16},
                             {"<f4", ScalarType::f32}, {"<f8", ScalarType::f64}};

}  // namespace

std::uint64_t NpyArray::count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

NpyArray parse_npy(ByteView bytes, const std::string& what) {
  auto bad = [&](const std::string& why) { fail(Errc::malformed, what + ": not a usable .npy file: " + why); };
  if (bytes.size < 10 || std::memcmp(bytes.data, "\x93NUMPY", 6) != 0) bad("bad magic");
  std::uint8_t major = bytes.data[6];
  std::uint64_t header_len = 0, header_start = 0;  // set by every branch that does not throw
  if (major == 1) {
    header_len = load_le16(bytes.data + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size < 12) bad("truncated");
    header_len = load_le32(bytes.data + 8);
    header_start = 12;
  } else {
    bad("format version " + std::to_string(major) + " is not 1, 2 or 3");
  }
  if (header_len > 65536 || header_start + header_len > bytes.size) bad("the header runs past the file");
  std::string header(reinterpret_cast<const char*>(bytes.data + header_start), header_len);
  auto value_of = [&](const std::string& key) {
    std::size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) bad("the header has no '" + key + "'");
    std::size_t colon = header.find(':', k);
    if (colon == std::string::npos) bad("the header is not a dict");
    std::size_t start = header.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? std::string() : header.substr(start);
  };
  NpyArray a;
  std::string descr = value_of("descr");
  bool known = false;
  for (const Descr& d : kDescrs) {
    if (descr.rfind(std::string("'") + d.text + "'", 0) == 0) {
      a.dtype = d.type;
      known = true;
    }
  }
  if (!known) bad("dtype " + descr.substr(0, descr.find(',')) + " is not one kiln kernels take (little-endian ints, f2, f4, f8)");
  if (value_of("fortran_order").rfind("False", 0) != 0) bad("Fortran order is not supported; save C-order arrays");
  std::string shape = value_of("shape");
  if (shape.empty() || shape[0] != '(') bad("bad shape");
  std::size_t close = shape.find(')');
  if (close == std::string::npos) bad("bad shape");
  std::string dims = shape.substr(1, close - 1);
  std::size_t pos = 0;
  while (pos < dims.size()) {
    std::size_t end = dims.find(',', pos);
    if (end == std::string::npos) end = dims.size();
    std::string part = dims.substr(pos, end - pos);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) {
      if (part.size() > 12 || part.find_first_not_of("0123456789") != std::string::npos) bad("bad dimension '" + part + "'");
      a.shape.push_back(std::stoull(part));
    }
    pos = end + 1;
  }
  std::uint64_t elements = 1;
  for (std::uint64_t d : a.shape) {
    if (d != 0 && elements > (1ull << 40) / d) bad("the shape is too large");
    elements *= d;
  }
  std::uint64_t data_start = header_start + header_len;
  std::uint64_t expected = elements * scalar_type_size(a.dtype);
  if (bytes.size - data_start != expected) {
    bad("the shape needs " + std::to_string(expected) + " data bytes but the file has " + std::to_string(bytes.size - data_start));
  }
  a.data = ByteView(bytes.data + data_start, static_cast<std::size_t>(expected));
  return a;
}

std::vector<std::uint8_t> write_npy(ScalarType dtype, const std::vector<std::uint64_t>& shape, const void* data) {
  const char* descr = nullptr;
  for (const Descr& d : kDescrs) {
    if (d.type == dtype) descr = d.text;
  }
  if (descr == nullptr) fail(Errc::unsupported, std::string(".npy has no dtype for ") + scalar_type_name(dtype));
  std::string dims;
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces to a multiple of 64 bytes, newline-terminated, as NumPy does.
  std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  static const std::uint8_t kMagic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::uint64_t bytes = count * scalar_type_size(dtype);
  std::vector<std::uint8_t> out;
  out.reserve(10 + header.size() + bytes);
  out.insert(out.end(), kMagic, kMagic + 8);
  out.push_back(static_cast<std::uint8_t>(header.size()));
  out.push_back(static_cast<std::uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + bytes);
  return out;
}

double npy_element(const NpyArray& a, std::uint64_t i) {
  const std::uint8_t* p = a.data.data + i * scalar_type_size(a.dtype);
  switch (a.dtype) {
    case ScalarType::i8: { std::int8_t v; std::memcpy(&v, p, 1); return v; }
    case ScalarType::i16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ScalarType::u8: return *p;
    case ScalarType::u16: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::u32: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::u64: { std::uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case ScalarType::f16:
    case ScalarType::bf16: { std::uint16_t v; std::memcpy(&v, p, 2); return narrow_float_value(a.dtype, v); }
    case ScalarType::f8e4m3:
    case ScalarType::f8e5m2: return narrow_float_value(a.dtype, *p);
    case ScalarType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::f64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  return 0;
}

bool npy_view_as(NpyArray* a, ScalarType param) {
  if (a->dtype == param) return true;
  // NumPy has no bf16 or fp8: their vectors hold the raw bits, as <u2 and |u1.
  bool raw = (param == ScalarType::bf16 && a->dtype == ScalarType::u16) ||
             ((param == ScalarType::f8e4m3 || param == ScalarType::f8e5m2) && a->dtype == ScalarType::u8);
  if (raw) a->dtype = param;
  return raw;
}

}  // namespace kiln
