// The C API's handle types: each a thin wrapper of its engine class (leveldb's c.cc does the
// same), so that the engine stays C++ with private state and the C boundary alone knows the
// C names. kiln_kernel is never defined: a kernel handle is the engine's Kernel, cast.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/archive.hpp"
#include "engine/package.hpp"
#include "engine/runtime.hpp"
#include "kiln/kiln.h"

struct kiln_runtime {
  explicit kiln_runtime(const kiln_runtime_options& options) : impl(options) {}
  kiln::engine::Runtime impl;
};

struct kiln_archive {
  template <class Source>
  kiln_archive(kiln_runtime& runtime, Source&& source) : impl(runtime.impl, std::forward<Source>(source)) {}
  kiln::engine::Archive impl;
};

struct kiln_package {
  kiln_package(kiln_runtime& runtime, std::string store_dir, std::string package, int device, std::string witness = "")
      : impl(runtime.impl, std::move(store_dir), std::move(package), device, std::move(witness)) {}
  kiln::engine::Package impl;
};

namespace kiln::api {

inline engine::Kernel* kernel_of(kiln_kernel* k) { return reinterpret_cast<engine::Kernel*>(k); }
inline const engine::Kernel* kernel_of(const kiln_kernel* k) { return reinterpret_cast<const engine::Kernel*>(k); }
inline kiln_kernel* handle_of(engine::Kernel* k) { return reinterpret_cast<kiln_kernel*>(k); }

}  // namespace kiln::api
