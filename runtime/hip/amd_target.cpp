#include "amd_target.hpp"

#include <tuple>

namespace kiln::hip {
namespace {

const char* name(Feature f) { return f == Feature::on ? "+" : f == Feature::off ? "-" : " any"; }

}  // namespace

bool parse_target_id(const std::string& text, TargetId* out) {
  TargetId t;
  t.text = text;
  std::size_t colon = text.find(':');
  t.processor = text.substr(0, colon);
  if (t.processor.size() < 4 || t.processor.compare(0, 3, "gfx") != 0) return false;
  for (std::size_t i = 3; i < t.processor.size(); ++i) {
    char c = t.processor[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
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
  if (code.processor != device.processor) {
    j.why = "built for " + code.processor + ", device is " + device.processor;
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
  j.rank = 100 + pinned;  // the most specific match first: it was built for exactly this setting
  j.why = pinned ? "exact match" : "matches (features unspecified)";
  return j;
}

}  // namespace kiln::hip
