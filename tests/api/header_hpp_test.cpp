// The C++ face compiled alone (it must include all it needs) with -Wall -Wextra -Wpedantic -Werror
// and the warnings an embedder may add, by the build's compiler and, through ctest, by g++ and
// clang++ where present. The templates are instantiated here, since a header's template is only
// checked once used.
#include "kiln/kiln.hpp"
#include "kiln/kiln_experimental.hpp"

namespace {

[[maybe_unused]] void instantiate_everything(kiln::Runtime& rt, kiln::Archive& archive, kiln::Package& package) {
  kiln::Kernel kernel = archive.kernel("k");
  void* args[2] = {nullptr, nullptr};
  const std::size_t sizes[2] = {8, 8};
  (void)kernel.launch(args);
  (void)kernel.launch(args, 2);
  (void)kernel.launch({args[0], args[1]}, nullptr);
  (void)kernel.launch_checked(args, sizes, 2);
  (void)kernel.explain(args, 2);
  (void)kernel.explain({args[0], args[1]});
  (void)kernel.params();
  (void)archive.read_member("kiln.toml");
  (void)archive.read_member_text("kiln.toml");
  (void)archive.preflight(0);
  (void)archive.preflight_target("sm_90", "12.4");
  (void)rt.last_error();
  (void)rt.stats_prometheus();
  rt.set_reference("k", [](const kiln_call_info&, void* const*, std::size_t, void*) { return 0; });
  (void)package.digest();
  (void)package.launch("k", {args[0], args[1]});
  kiln::Runtime moved(std::move(rt));
  rt = std::move(moved);
  // kiln_experimental.hpp's
  kiln::experimental::check_target("sm_90", "12.4");
  (void)kiln::experimental::plan_target(archive, "sm_90");
  (void)kiln::experimental::plan_host(archive);
  (void)kiln::experimental::members(archive);
  (void)kiln::experimental::device_of(kernel);
  kiln::experimental::DeviceBuffer buffer(kernel, 64);
  buffer.fill(0xff);
  buffer.write(sizes, sizeof sizes);
  std::size_t back[2] = {};
  buffer.read(back, sizeof back);
  args[0] = buffer.argument();
  kiln::experimental::DeviceBuffer taken(std::move(buffer));
  (void)taken.address();
  kiln::experimental::synchronize(kernel);
  (void)kiln::experimental::time(kernel, args, 2, 10);
  (void)kiln::experimental::choice(kernel, args, 2);
}

}  // namespace

int main() {
  kiln::RuntimeOptions options;  // kiln_runtime_options_init, which throws on failure
  (void)options.c_options();
  return kiln::version() == KILN_VERSION_NUMBER ? 0 : 1;
}
