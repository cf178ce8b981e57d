#include "hip/hip_target.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

namespace kiln::hip {
namespace {

const char* name(Feature f) { return f == Feature::on ? "+" : f == Feature::off ? "-" : " any"; }

}  // namespace

std::vector<std::string> generic_family(const std::string& generic) {
  // LLVM AMDGPUUsage, "Generic processors": which processors each generic target runs on.
  static const std::pair<const char*, std::vector<std::string>> families[] = {
      {"gfx9-generic", {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}},
      {"gfx9-4-generic", {"gfx940", "gfx941", "gfx942", "gfx950"}},
      {"gfx10-1-generic", {"gfx1010", "gfx1011", "gfx1012", "gfx1013"}},
      {"gfx10-3-generic", {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}},
      {"gfx11-generic", {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}},
      {"gfx12-generic", {"gfx1200", "gfx1201"}},
  };
  for (const auto& [name, members] : families) {
    if (generic == name) return members;
  }
  return {};
}

bool parse_target_id(const std::string& text, TargetId* out) {
  TargetId t;
  t.text = text;
  std::size_t colon = text.find(':');
  t.processor = text.substr(0, colon);
  if (t.processor.size() < 4 || t.processor.compare(0, 3, "gfx") != 0) return false;
  std::string stem = t.processor;
  if (stem.size() > 8 && stem.compare(stem.size() - 8, 8, "-generic") == 0) {
    if (generic_family(stem).empty()) return false;  // only the generic targets LLVM defines
  } else {
    for (std::size_t i = 3; i < stem.size(); ++i) {
      char c = stem[i];
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
  }
  bool seen_sramecc = false, seen_xnack = false;
  while (colon != std::string::npos) {
    std::size_t next = text.find(':', colon + 1);
    std::string part = text.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
    if (part.size() < 2) return false;
    char sign = part.back();
    if (sign != '+' && sign != '-') return false;
    std::string feature = part.substr(0, part.size() - 1);
    Feature value = sign == '+' ? Feature::on : Feature::off;
    if (feature == "sramecc" && !seen_sramecc) t.sramecc = value, seen_sramecc = true;
    else if (feature == "xnack" && !seen_xnack) t.xnack = value, seen_xnack = true;
    else return false;  // unknown or repeated feature
    colon = next;
  }
  *out = t;
  return true;
}

Judgement judge(const TargetId& code, const TargetId& device) {
  Judgement j;
  std::vector<std::string> family = generic_family(code.processor);
  bool generic = !family.empty();
  bool in_family = std::find(family.begin(), family.end(), device.processor) != family.end();
  if (generic ? !in_family : code.processor != device.processor) {
    j.why = "built for " + code.processor + (generic ? " (a generic target)" : "") + ", device is " + device.processor;
    return j;
  }
  int pinned = 0;
  struct Pair {
    const char* feature;
    Feature c, d;
  };
  const Pair pairs[] = {{"sramecc", code.sramecc, device.sramecc}, {"xnack", code.xnack, device.xnack}};
  for (const auto& [feature, c, d] : pairs) {
    if (c == Feature::any) continue;
    if (c != d) {
      j.why = std::string(feature) + name(c) + " code cannot run on a device with " + feature + name(d);
      return j;
    }
    ++pinned;
  }
  j.fits = true;
  // The most specific match first: the exact processor before a generic one, and among those
  // the code built for exactly this feature setting.
  j.rank = (generic ? 50 : 100) + pinned;
  j.why = generic ? "generic target covering " + device.processor : pinned ? "exact match" : "matches (features unspecified)";
  return j;
}

}  // namespace kiln::hip
