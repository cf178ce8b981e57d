#include "api/api_support.hpp"

#include <mutex>
#include <unordered_set>
#include <utility>

#include "engine/runtime.hpp"

namespace kiln::api {
namespace {

struct ThreadError {
  std::string message;
  const engine::Runtime* runtime = nullptr;  // the runtime of the failed call, if one was known
};
thread_local ThreadError t_error;

struct HandleHash {
  std::size_t operator()(const std::pair<HandleKind, const void*>& h) const {
    return std::hash<const void*>()(h.second) ^ static_cast<std::size_t>(h.first);
  }
};
std::mutex& handles_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_set<std::pair<HandleKind, const void*>, HandleHash>& handles() {
  static auto* set = new std::unordered_set<std::pair<HandleKind, const void*>, HandleHash>();  // never freed:
  return *set;  // a destroy from another library's static destructor must still find it
}

}  // namespace


void record_error(const engine::Runtime* runtime, const std::string& message) {
  try {
    t_error.message = message;
    t_error.runtime = runtime;
    if (runtime != nullptr) runtime->set_error(message);
  } catch (...) {
    // Out of memory while keeping a message: the status still says what happened.
  }
}

void clear_error() {
  t_error.message.clear();
  t_error.runtime = nullptr;
}

const std::string& thread_error() { return t_error.message; }

const std::string* thread_error_for(const engine::Runtime* runtime) {
  return t_error.runtime == runtime && !t_error.message.empty() ? &t_error.message : nullptr;
}

kiln_status invalid(const engine::Runtime* runtime, const std::string& message) {
  record_error(runtime, message);
  return KILN_ERR_INVALID_ARGUMENT;
}

kiln_status copy_message(const std::string& text, char* buffer, std::size_t capacity, std::size_t* needed) {
  if (needed) *needed = text.size() + 1;
  if (capacity > 0 && buffer == nullptr) return KILN_ERR_INVALID_ARGUMENT;
  if (capacity > 0) {
    std::size_t n = text.size() < capacity - 1 ? text.size() : capacity - 1;
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size() + 1 > capacity ? KILN_ERR_BUFFER_TOO_SMALL : KILN_OK;
}

bool struct_size_ok(std::size_t size) { return size >= sizeof(std::uint32_t) && size <= KILN_MAX_STRUCT_SIZE; }

kiln_status bad_struct_size(const std::string& what, std::size_t size) {
  return invalid(nullptr, what + " " + std::to_string(size) + " is not a size of this struct (" +
                              std::to_string(sizeof(std::uint32_t)) + " to " + std::to_string(KILN_MAX_STRUCT_SIZE) +
                              " bytes): pass sizeof the struct, as its *_init function takes it");
}

void track(HandleKind kind, const void* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex());
  handles().insert({kind, handle});
}

bool untrack(HandleKind kind, const void* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex());
  return handles().erase({kind, handle}) == 1;
}

}  // namespace kiln::api
