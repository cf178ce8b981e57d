// The experimental C boundary (include/kiln/kiln_experimental.h): described-target planning,
// members by position, and device tools on a kernel's device. The same rules as kiln_api.cpp:
// every function is `guarded`, so no exception leaves this file and every outcome is recorded
// for the calling thread.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "api/api_support.hpp"
#include "api/handles.hpp"
#include "core/error.hpp"
#include "engine/archive.hpp"
#include "engine/described_target.hpp"
#include "engine/kernel.hpp"
#include "engine/runtime.hpp"
#include "kiln/kiln_experimental.h"

using kiln::Errc;
using kiln::Failure;
using kiln::api::copy_message;
using kiln::api::guarded;
using kiln::api::guarded_status;
using kiln::api::invalid;
using kiln::api::kernel_of;

namespace {

constexpr unsigned kMaxTimedRepeats = 100000;

// Member positions into a caller's array: all of them, or KILN_ERR_BUFFER_TOO_SMALL.
kiln_status copy_positions(const std::vector<std::size_t>& found, size_t* members, size_t capacity, size_t* count) {
  std::vector<std::size_t> sorted = found;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (count != nullptr) *count = sorted.size();
  if (sorted.size() > capacity) return KILN_ERR_BUFFER_TOO_SMALL;
  std::copy(sorted.begin(), sorted.end(), members);
  return KILN_OK;
}

// The tools of the device a kernel runs on; throws naming what is missing.
std::unique_ptr<kiln::backend::DeviceTools> tools_of(const kiln::engine::Kernel& k) {
  if (!k.runs_on_device() || k.device_backend() == nullptr || k.device_info() == nullptr) {
    throw Failure(Errc::invalid_argument, "kernel '" + k.name() + "' does not run on device " +
                                              std::to_string(k.device()) + " here (route " +
                                              kiln_route_string(k.route()) + "): it has no device to use");
  }
  std::string why;
  std::unique_ptr<kiln::backend::DeviceTools> tools = k.device_backend()->tools(*k.device_info(), &why);
  if (!tools) throw Failure(Errc::unsupported, why);
  return tools;
}

// A driver status of a device tool as a failure naming the call.
void check_driver(const kiln::engine::Kernel& k, int status, const std::string& what) {
  if (status != 0) {
    throw Failure(Errc::driver, k.device_info()->describe + ": " + what + ": " + k.device_backend()->describe_error(status));
  }
}

// Runs a device tool for a kernel's C handle under the boundary's rules.
template <typename Body>
kiln_status with_tools(const kiln_kernel* kernel, const char* what, Body&& body) {
  if (kernel == nullptr) return invalid(nullptr, std::string(what) + ": kernel is NULL");
  const kiln::engine::Kernel& k = *kernel_of(kernel);
  return guarded(&k.archive().runtime(), [&] {
    std::unique_ptr<kiln::backend::DeviceTools> tools = tools_of(k);
    body(k, *tools);
  });
}

}  // namespace

extern "C" {

kiln_status kiln_x_target_check(const char* target, const char* driver) {
  if (target == nullptr) return invalid(nullptr, "kiln_x_target_check: target is NULL");
  return guarded(nullptr, [&] { kiln::engine::parse_described_target(target, driver != nullptr ? driver : ""); });
}

kiln_status kiln_x_archive_plan_target(kiln_archive* archive, const char* target, const char* driver, size_t* members,
                                       size_t capacity, size_t* count) {
  if (archive == nullptr || target == nullptr || (members == nullptr && capacity > 0)) {
    return invalid(archive ? &archive->impl.runtime() : nullptr,
                   "kiln_x_archive_plan_target: archive and target are required (and members where capacity > 0)");
  }
  return guarded_status(&archive->impl.runtime(), "kiln_x_archive_plan_target: the members do not fit the array", [&] {
    return copy_positions(archive->impl.code_for_target(target, driver != nullptr ? driver : ""), members, capacity, count);
  });
}

kiln_status kiln_x_archive_plan_host(kiln_archive* archive, size_t* members, size_t capacity, size_t* count,
                                     char* devices, size_t devices_capacity, size_t* devices_needed) {
  if (archive == nullptr || (members == nullptr && capacity > 0) || (devices == nullptr && devices_capacity > 0)) {
    return invalid(archive ? &archive->impl.runtime() : nullptr,
                   "kiln_x_archive_plan_host: archive is required (and members, devices where their capacity > 0)");
  }
  return guarded_status(&archive->impl.runtime(), "kiln_x_archive_plan_host: the members or devices do not fit", [&] {
    std::vector<std::string> found;
    std::vector<std::size_t> planned = archive->impl.code_for_host(&found);
    std::string lines;
    for (const std::string& f : found) lines += (lines.empty() ? "" : "\n") + f;
    kiln_status text = copy_message(lines, devices, devices_capacity, devices_needed);
    kiln_status positions = copy_positions(planned, members, capacity, count);
    return positions != KILN_OK ? positions : text;
  });
}

kiln_status kiln_x_member_info_init(kiln_x_member_info* info, size_t size) {
  return kiln::api::init_struct(info, kiln_x_member_info{}, size, "kiln_x_member_info_init");
}

size_t kiln_x_archive_member_count(const kiln_archive* archive) {
  return archive != nullptr ? archive->impl.reader().index().entries.size() : 0;
}

kiln_status kiln_x_archive_member(const kiln_archive* archive, size_t index, kiln_x_member_info* info) {
  const kiln::engine::Runtime* rt = archive ? &archive->impl.runtime() : nullptr;
  if (archive == nullptr || info == nullptr) return invalid(rt, "kiln_x_archive_member: archive and info are required");
  const kiln::ArchiveReader& reader = archive->impl.reader();
  const std::vector<kiln::format::Entry>& entries = reader.index().entries;
  if (index >= entries.size()) {
    kiln::api::record_error(rt, "kiln_x_archive_member: " + reader.name() + " has " + std::to_string(entries.size()) +
                                    " members, index " + std::to_string(index) + " is past them");
    return KILN_ERR_NOT_FOUND;
  }
  const kiln::format::Entry& e = entries[index];
  kiln_x_member_info full{};
  full.path = e.path.c_str();
  full.role = kiln::format::role_name(e.role);
  full.content_size = e.content_size;
  full.stored_size = e.stored_size;
  full.present = reader.member_present(index) ? 1 : 0;
  return kiln::api::fill_struct(info, full, rt, "kiln_x_archive_member");
}

kiln_status kiln_x_device_info_init(kiln_x_device_info* info, size_t size) {
  return kiln::api::init_struct(info, kiln_x_device_info{}, size, "kiln_x_device_info_init");
}

kiln_status kiln_x_kernel_device(const kiln_kernel* kernel, kiln_x_device_info* info) {
  if (kernel == nullptr || info == nullptr) return invalid(nullptr, "kiln_x_kernel_device: kernel and info are required");
  const kiln::engine::Kernel& k = *kernel_of(kernel);
  const kiln::engine::Runtime* rt = &k.archive().runtime();
  const kiln::backend::DeviceInfo* d = k.device_info();
  if (d == nullptr || k.device_backend() == nullptr) {
    kiln::api::record_error(rt, "kiln_x_kernel_device: kernel '" + k.name() + "' was judged against no device: " +
                                    k.reason_text());
    return KILN_ERR_NOT_FOUND;
  }
  kiln_x_device_info full{};
  full.vendor = k.device_backend()->vendor();
  full.name = d->name.c_str();
  full.arch = d->arch.c_str();
  full.driver_version = d->driver_version.c_str();
  full.cc_major = d->cc_major;
  full.cc_minor = d->cc_minor;
  std::string why;
  if (std::unique_ptr<kiln::backend::DeviceTools> tools = k.device_backend()->tools(*d, &why)) {
    full.memory_bytes = tools->total_memory();
  }
  return kiln::api::fill_struct(info, full, rt, "kiln_x_kernel_device");
}

kiln_status kiln_x_device_alloc(const kiln_kernel* kernel, size_t bytes, uint64_t* address) {
  if (address == nullptr) return invalid(nullptr, "kiln_x_device_alloc: address is NULL");
  *address = 0;
  return with_tools(kernel, "kiln_x_device_alloc", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.allocate(bytes, address), "allocating " + std::to_string(bytes) + " bytes");
  });
}

kiln_status kiln_x_device_free(const kiln_kernel* kernel, uint64_t address) {
  return with_tools(kernel, "kiln_x_device_free", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.release(address), "freeing device memory");
  });
}

kiln_status kiln_x_device_fill(const kiln_kernel* kernel, uint64_t address, unsigned char byte, size_t bytes) {
  return with_tools(kernel, "kiln_x_device_fill", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.fill(address, byte, bytes), "filling " + std::to_string(bytes) + " bytes");
  });
}

kiln_status kiln_x_device_write(const kiln_kernel* kernel, uint64_t address, const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid(nullptr, "kiln_x_device_write: data is NULL");
  return with_tools(kernel, "kiln_x_device_write", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.write(address, data, bytes), "copying " + std::to_string(bytes) + " bytes to the device");
  });
}

kiln_status kiln_x_device_read(const kiln_kernel* kernel, void* data, uint64_t address, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid(nullptr, "kiln_x_device_read: data is NULL");
  return with_tools(kernel, "kiln_x_device_read", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.read(data, address, bytes), "copying " + std::to_string(bytes) + " bytes from the device");
  });
}

kiln_status kiln_x_device_synchronize(const kiln_kernel* kernel) {
  return with_tools(kernel, "kiln_x_device_synchronize", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    check_driver(k, t.synchronize(), "the work on the device failed");
  });
}

kiln_status kiln_x_kernel_time(kiln_kernel* kernel, void* const* args, size_t arg_count, unsigned repeats,
                               double* median_us) {
  if (median_us == nullptr || repeats == 0 || repeats > kMaxTimedRepeats) {
    return invalid(nullptr, "kiln_x_kernel_time: median_us is required and repeats must be 1 to " +
                                std::to_string(kMaxTimedRepeats) + " (got " + std::to_string(repeats) + ")");
  }
  *median_us = 0;
  return with_tools(kernel, "kiln_x_kernel_time", [&](const kiln::engine::Kernel& k, kiln::backend::DeviceTools& t) {
    std::vector<double> times;
    kiln::engine::Kernel& launched = *kernel_of(kernel);
    check_driver(k, t.time([&] { launched.launch(args, arg_count, nullptr); }, repeats, &times), "timing the kernel");
    std::sort(times.begin(), times.end());
    *median_us = times[times.size() / 2];
  });
}

kiln_status kiln_x_kernel_choice(const kiln_kernel* kernel, void* const* args, size_t arg_count, const char** variant,
                                 const char** code_path) {
  if (kernel == nullptr || variant == nullptr || code_path == nullptr) {
    return invalid(nullptr, "kiln_x_kernel_choice: kernel, variant and code_path are required");
  }
  const kiln::engine::Kernel& k = *kernel_of(kernel);
  return guarded(&k.archive().runtime(), [&] {
    const std::size_t params = k.spec().params.size();
    if (arg_count != params || (args == nullptr && params > 0)) {
      throw Failure(Errc::invalid_argument, "kiln_x_kernel_choice: kernel '" + k.name() + "' takes " +
                                                std::to_string(params) + " arguments, given " + std::to_string(arg_count));
    }
    k.explain_call(args, arg_count);  // the arguments checked as a launch checks them (NULL ones, ...)
    int v = k.variant_for(args);
    *variant = v >= 0 ? k.spec().variants[static_cast<std::size_t>(v)].name.c_str() : "";
    *code_path = k.code_path(v).c_str();
  });
}

}  // extern "C"
