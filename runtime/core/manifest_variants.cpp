// kiln.toml's [[kernel.variant]]: builds of the kernel's code specialised for some calls (an
// integer argument a multiple of 16, as Triton's JIT specialises), chosen per call by their
// conditions. MANIFEST.md, "variant entries", is the specification; what can be checked without
// the files is checked here, with its position (the files' real targets are checked at pack).
#include <set>

#include "core/format.hpp"
#include "core/manifest_toml.hpp"

namespace kiln::manifest_toml {

namespace {

VariantSpec parse_variant(TableReader& kt, const toml::node& n, std::size_t i, const KernelSpec& k) {
  std::string where = kt.where() + " variant[" + std::to_string(i) + "]";
  if (!n.is_table()) {
    kt.fail_at(n, where + " must be a table such as { name = \"k16\", when = [\"k % 16 == 0\"], code = [...] }");
  }
  TableReader t(kt.file(), *n.as_table(), where);
  VariantSpec v;
  v.pos = pos_of(n);
  v.name = t.string("name", "\"k16\"");
  if (auto p = format::member_path_problem(v.name); !p.empty() || v.name.find('/') != std::string::npos || v.name.size() > 128) {
    t.fail_at(t.require("name", ""), "variant name '" + v.name + "' must use only [A-Za-z0-9._+@=-], 1 to 128 characters" +
                                         (p.empty() ? "" : ": " + p));
  }
  TableReader named(kt.file(), *n.as_table(), kt.where() + " variant '" + v.name + "'");
  const toml::node& wn = named.require("when", "conditions such as [\"k % 16 == 0\"]");
  const toml::array& wa = named.array(wn, "when", "condition strings such as \"k % 16 == 0\"");
  if (wa.empty() || wa.size() > kMaxVariantConditions) {
    named.fail_at(wn, "'when' in " + named.where() + " must hold 1 to " + std::to_string(kMaxVariantConditions) +
                          " conditions, found " + std::to_string(wa.size()) +
                          " (a variant without conditions would take every call from the kernel's own code)");
  }
  for (std::size_t j = 0; j < wa.size(); ++j) {
    if (!wa[j].is_string()) named.fail_at(wa[j], "'when' in " + named.where() + " must hold condition strings, found " + toml_type_name(wa[j]));
    v.when.push_back(expression(named, wa[j], "when[" + std::to_string(j) + "]", ExprKind::condition, k));
  }
  // One code object per target of the kernel's code, stored in the kernel's order, so that the
  // runtime takes the variant's file for the target it chose for the kernel.
  const toml::node& cn = named.require("code", "one { arch, file } per arch of the kernel's code");
  const toml::array& ca = named.array(cn, "code", "code object tables");
  std::vector<CodeObjectRef> given;
  for (std::size_t j = 0; j < ca.size(); ++j) given.push_back(parse_code(named, ca[j], j));
  v.code.resize(k.code.size());
  std::vector<bool> have(k.code.size(), false);
  std::string archs;
  for (const CodeObjectRef& c : k.code) archs += (archs.empty() ? "" : ", ") + c.arch;
  for (std::size_t j = 0; j < given.size(); ++j) {
    std::size_t at = k.code.size();
    for (std::size_t m = 0; m < k.code.size(); ++m) {
      if (k.code[m].arch == given[j].arch) at = m;
    }
    if (at == k.code.size()) {
      named.fail_at(ca[j], "arch '" + given[j].arch + "' in " + named.where() + " is not an arch of the code of kernel '" +
                               k.name + "' (" + archs + "); a variant specialises the kernel's own targets");
    }
    if (have[at]) named.fail_at(ca[j], "arch '" + given[j].arch + "' appears twice in " + named.where());
    have[at] = true;
    v.code[at] = given[j];
  }
  for (std::size_t m = 0; m < k.code.size(); ++m) {
    if (!have[m]) {
      named.fail_at(cn, named.where() + " has no code for arch '" + k.code[m].arch + "' (a variant gives one code object " +
                            "for each arch of the kernel's code: " + archs + ")");
    }
  }
  if (const toml::node* an = named.get("kernel_args")) {
    v.has_kernel_args = true;
    v.kernel_args = parse_kernel_args(named, *an, k);
  }
  named.get("name");  // read above through `t`
  named.no_unknown_keys("name, when, code, kernel_args");
  return v;
}

}  // namespace

std::vector<VariantSpec> parse_variants(TableReader& kt, const toml::node& n, const KernelSpec& k) {
  const toml::array& a = kt.array(n, "variant", "variant tables");
  if (a.size() > kMaxVariants) {
    kt.fail_at(n, "kernel '" + k.name + "' has " + std::to_string(a.size()) + " variants; at most " +
                      std::to_string(kMaxVariants) + " are allowed");
  }
  std::vector<VariantSpec> out;
  std::set<std::string> names;
  for (std::size_t i = 0; i < a.size(); ++i) {
    VariantSpec v = parse_variant(kt, a[i], i, k);
    if (!names.insert(v.name).second) kt.fail_at(a[i], "variant '" + v.name + "' appears twice in kernel '" + k.name + "'");
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace kiln::manifest_toml
