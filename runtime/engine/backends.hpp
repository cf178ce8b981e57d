// The GPU vendors libkiln runs on, listed once: how a Runtime makes each vendor's backend for
// the devices of this host, and how `kiln preflight --target` makes one for a GPU described
// rather than present. Adding a vendor is a folder implementing backend::Backend and a row here.
#pragma once

#include "backend/backend.hpp"
#include "engine/described_target.hpp"
#include "kiln/kiln.h"

namespace kiln::engine {

// One backend per vendor for this host's devices (the options name each vendor's library).
backend::BackendList device_backends(const kiln_runtime_options& options);
// One backend per vendor for a described target: that vendor's judges against it, every other
// one has no device ("target sm_90 is an NVIDIA GPU").
backend::BackendList described_backends(const DescribedTarget& target);
// The backend of `vendor` in `list`, or null.
backend::Backend* find_backend(const backend::BackendList& list, format::Vendor vendor);

}  // namespace kiln::engine
