// kiln_experimental.hpp: kiln.hpp's face over kiln_experimental.h, in namespace kiln::experimental.
// The same terms as that header: nothing here is stable from one release to the next (the kiln
// command and its tests are its users). Errors are kiln::Error, as in kiln.hpp.
#ifndef KILN_KILN_EXPERIMENTAL_HPP
#define KILN_KILN_EXPERIMENTAL_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln.hpp"
#include "kiln_experimental.h"

namespace kiln::experimental {

// Throws kiln::Error (KILN_ERR_INVALID_ARGUMENT, naming it) unless `target` is a GPU kiln can judge.
inline void check_target(const std::string& target, const std::string& driver = std::string()) {
  kiln::detail::check(kiln_x_target_check(target.c_str(), driver.c_str()));
}

namespace lists {
// kiln_experimental.h's member arrays: asked for their count, then filled.
template <typename Fill>
std::vector<std::size_t> positions(Fill fill) {
  std::vector<std::size_t> members;
  std::size_t count = 0;
  kiln_status status = fill(nullptr, 0, &count);
  while (status == KILN_ERR_BUFFER_TOO_SMALL) {
    members.resize(count);
    status = fill(members.data(), members.size(), &count);
  }
  kiln::detail::check(status);
  members.resize(count);
  return members;
}
}  // namespace lists

// The members (index positions) a sparse pull for a described target must fetch.
inline std::vector<std::size_t> plan_target(const Archive& archive, const std::string& target,
                                            const std::string& driver = std::string()) {
  return lists::positions([&](std::size_t* members, std::size_t capacity, std::size_t* count) {
    return kiln_x_archive_plan_target(archive.get(), target.c_str(), driver.c_str(), members, capacity, count);
  });
}

struct HostPlan {
  std::vector<std::size_t> members;
  std::vector<std::string> devices;  // each GPU found, described
};

// The same for this host's GPUs. kiln::Error KILN_ERR_NOT_FOUND when it has none.
inline HostPlan plan_host(const Archive& archive) {
  HostPlan plan;
  std::string devices;
  std::size_t count = 0, needed = 0;
  kiln_status status = kiln_x_archive_plan_host(archive.get(), nullptr, 0, &count, nullptr, 0, &needed);
  while (status == KILN_ERR_BUFFER_TOO_SMALL) {
    plan.members.resize(count);
    devices.assign(needed, '\0');
    status = kiln_x_archive_plan_host(archive.get(), plan.members.data(), plan.members.size(), &count, devices.data(),
                                      devices.size(), &needed);
  }
  kiln::detail::check(status);
  plan.members.resize(count);
  devices.resize(needed > 0 ? needed - 1 : 0);
  for (std::size_t start = 0; start < devices.size();) {
    std::size_t end = devices.find('\n', start);
    if (end == std::string::npos) end = devices.size();
    plan.devices.push_back(devices.substr(start, end - start));
    start = end + 1;
  }
  return plan;
}

struct Member {
  std::string path;
  std::string role;  // "manifest", "code", "source", "ir", "testdata", "meta"
  std::uint64_t content_size = 0;
  std::uint64_t stored_size = 0;
  bool present = true;
};

// Every member as the signed index lists it, in index order.
inline std::vector<Member> members(const Archive& archive) {
  std::vector<Member> all;
  for (std::size_t i = 0, n = kiln_x_archive_member_count(archive.get()); i < n; ++i) {
    kiln_x_member_info info;
    kiln::detail::check(kiln_x_member_info_init(&info, sizeof info));
    kiln::detail::check(kiln_x_archive_member(archive.get(), i, &info));
    all.push_back({kiln::detail::borrowed(info.path), kiln::detail::borrowed(info.role), info.content_size,
                   info.stored_size, info.present != 0});
  }
  return all;
}

struct Device {
  std::string vendor, name, arch, driver_version;
  int cc_major = 0, cc_minor = 0;
  std::uint64_t memory_bytes = 0;  // 0 when the driver cannot say
};

// The device the kernel was judged against; nullopt when there was none.
inline std::optional<Device> device_of(const Kernel& kernel) {
  kiln_x_device_info info;
  kiln::detail::check(kiln_x_device_info_init(&info, sizeof info));
  kiln_status status = kiln_x_kernel_device(kernel.get(), &info);
  if (status == KILN_ERR_NOT_FOUND) return std::nullopt;
  kiln::detail::check(status);
  return Device{kiln::detail::borrowed(info.vendor), kiln::detail::borrowed(info.name), kiln::detail::borrowed(info.arch),
                kiln::detail::borrowed(info.driver_version), info.cc_major, info.cc_minor, info.memory_bytes};
}

// Device memory on the device a kernel runs on, freed when the buffer goes, which must be before
// the kernel's archive is (the buffer frees through the kernel). A kernel's pointer argument is
// the address: args[i] = buffer.argument().
class DeviceBuffer {
 public:
  DeviceBuffer(const Kernel& kernel, std::size_t bytes) : kernel_(kernel), bytes_(bytes) {
    kiln::detail::check(kiln_x_device_alloc(kernel_.get(), bytes, &address_));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : kernel_(other.kernel_), address_(std::exchange(other.address_, 0)), bytes_(other.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() {
    if (address_ != 0) kiln_x_device_free(kernel_.get(), address_);
  }

  std::uint64_t address() const noexcept { return address_; }
  std::size_t size() const noexcept { return bytes_; }
  // What a launch's args[i] points at for a pointer parameter.
  void* argument() noexcept { return &address_; }
  void fill(unsigned char byte) const { kiln::detail::check(kiln_x_device_fill(kernel_.get(), address_, byte, bytes_)); }
  void write(const void* data, std::size_t bytes) const {
    kiln::detail::check(kiln_x_device_write(kernel_.get(), address_, data, bytes));
  }
  void read(void* data, std::size_t bytes) const {
    kiln::detail::check(kiln_x_device_read(kernel_.get(), data, address_, bytes));
  }

 private:
  Kernel kernel_;
  std::uint64_t address_ = 0;
  std::size_t bytes_ = 0;
};

inline void synchronize(const Kernel& kernel) { kiln::detail::check(kiln_x_device_synchronize(kernel.get())); }

// The median of `repeats` timed launches, in microseconds.
inline double time(const Kernel& kernel, void* const* args, std::size_t arg_count, unsigned repeats) {
  double median = 0;
  kiln::detail::check(kiln_x_kernel_time(kernel.get(), args, arg_count, repeats, &median));
  return median;
}

struct Choice {
  std::string variant;    // "" for the kernel's own code
  std::string code_path;  // "" when the kernel does not run on the device
};

inline Choice choice(const Kernel& kernel, void* const* args, std::size_t arg_count) {
  const char* variant = nullptr;
  const char* code_path = nullptr;
  kiln::detail::check(kiln_x_kernel_choice(kernel.get(), args, arg_count, &variant, &code_path));
  return {kiln::detail::borrowed(variant), kiln::detail::borrowed(code_path)};
}

}  // namespace kiln::experimental

#endif  // KILN_KILN_EXPERIMENTAL_HPP
