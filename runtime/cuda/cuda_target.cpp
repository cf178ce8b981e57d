#include "cuda/cuda_target.hpp"

#include <cstdio>

namespace kiln::cuda {
namespace {

bool parse_uint(const std::string& s, int* out) {
  if (s.empty() || s.size() > 6) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

std::string cc_text(int major, int minor) { return std::to_string(major) + "." + std::to_string(minor); }

}  // namespace

bool parse_target(const std::string& tag, Target* out) {
  Target t;
  std::string rest;
  if (tag.rfind("sm_", 0) == 0) {
    rest = tag.substr(3);
  } else if (tag.rfind("compute_", 0) == 0) {
    t.is_ptx = true;
    rest = tag.substr(8);
  } else {
    return false;
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    t.suffix = rest.back();
    rest.pop_back();
  }
  int number = 0;
  if (!parse_uint(rest, &number) || number < 10) return false;
  // sm_90 is cc 9.0, sm_86 is 8.6, sm_100 is 10.0, sm_121 is 12.1: the last digit is the minor.
  t.major = number / 10;
  t.minor = number % 10;
  t.tag = tag;
  *out = t;
  return true;
}

int driver_for_ptx_isa(int isa_major, int isa_minor) {
  // PTX ISA version -> the CUDA release that introduced it (PTX ISA release notes).
  struct Row {
    int isa_major, isa_minor, cuda;
  };
  static const Row table[] = {
      {6, 0, 9000},  {6, 1, 9010},  {6, 2, 9020},  {6, 3, 10000}, {6, 4, 10010}, {6, 5, 10020},
      {7, 0, 11000}, {7, 1, 11010}, {7, 2, 11020}, {7, 3, 11030}, {7, 4, 11040}, {7, 5, 11050},
      {7, 6, 11060}, {7, 7, 11070}, {7, 8, 11080}, {8, 0, 12000}, {8, 1, 12010}, {8, 2, 12020},
      {8, 3, 12030}, {8, 4, 12040}, {8, 5, 12050}, {8, 6, 12070}, {8, 7, 12080}, {8, 8, 12090},
      {9, 0, 13000},
  };
  for (const Row& r : table) {
    if (r.isa_major == isa_major && r.isa_minor == isa_minor) return r.cuda;
  }
  if (isa_major < 6) return 9000;  // older than any driver this runtime supports anyway
  return 0;
}

bool parse_version_pair(const std::string& text, int* major, int* minor) {
  std::size_t dot = text.find('.');
  if (dot == std::string::npos) return false;
  return parse_uint(text.substr(0, dot), major) && parse_uint(text.substr(dot + 1), minor);
}

std::string driver_version_text(int driver_version) {
  return std::to_string(driver_version / 1000) + "." + std::to_string((driver_version % 1000) / 10);
}

Judgement judge(const Target& t, const DeviceSpec& d, const std::string& ptx_isa) {
  Judgement j;
  const std::string device_cc = cc_text(d.cc_major, d.cc_minor);
  if (!t.is_ptx) {
    // SASS: same major, device minor >= target minor; 'a' only on exactly that cc.
    bool fits = t.suffix == 'a' ? (d.cc_major == t.major && d.cc_minor == t.minor)
                                : (d.cc_major == t.major && d.cc_minor >= t.minor);
    if (!fits) {
      j.why = t.suffix == 'a' ? "runs only on cc " + cc_text(t.major, t.minor) + ", device is cc " + device_cc
                              : "runs on cc " + cc_text(t.major, t.minor) + " up to " + std::to_string(t.major) +
                                    ".x, device is cc " + device_cc;
      return j;
    }
    bool exact = d.cc_minor == t.minor;
    j.verdict = Verdict::fits;
    // Exact before compatible; among exact, the arch-specific 'a' build (which may use
    // instructions only this chip has) before the family 'f' build before the plain one.
    int specificity = t.suffix == 'a' ? 2 : t.suffix == 'f' ? 1 : 0;
    j.rank = exact ? 3000 + specificity : 2000 + t.minor * 10 + specificity;
    j.why = exact ? "exact match" : "compatible (cc " + cc_text(t.major, t.minor) + " code on cc " + device_cc + ")";
    return j;
  }
  // PTX: JIT-compiled on any cc >= the target's ('a' exactly that cc, 'f' within the family).
  bool arch_fits = t.suffix == 'a'   ? (d.cc_major == t.major && d.cc_minor == t.minor)
                   : t.suffix == 'f' ? (d.cc_major == t.major && d.cc_minor >= t.minor)
                                     : (d.cc_major > t.major || (d.cc_major == t.major && d.cc_minor >= t.minor));
  if (!arch_fits) {
    j.why = "PTX for cc " + cc_text(t.major, t.minor) + (t.suffix ? std::string(1, t.suffix) : "") +
            " cannot be compiled for cc " + device_cc;
    return j;
  }
  if (!ptx_isa.empty()) {
    int isa_major = 0, isa_minor = 0;
    if (parse_version_pair(ptx_isa, &isa_major, &isa_minor)) {
      int needed = driver_for_ptx_isa(isa_major, isa_minor);
      if (needed == 0 || d.driver_version < needed) {
        j.verdict = Verdict::driver_too_old;
        j.why = "PTX ISA " + ptx_isa + " needs a CUDA " +
                (needed ? driver_version_text(needed) : std::string("newer than 13.0")) + " driver, device has " +
                driver_version_text(d.driver_version);
        return j;
      }
    }
  }
  j.verdict = Verdict::fits;
  j.rank = 1000 + t.major * 10 + t.minor;  // the newest PTX the device accepts
  j.why = "PTX JIT-compiled for cc " + device_cc;
  return j;
}

}  // namespace kiln::cuda
