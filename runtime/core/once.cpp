#include "core/once.hpp"

#include <condition_variable>
#include <mutex>

namespace kiln {
namespace {

// Callers waiting for another thread's step, over every Once: a step that finishes reads it
// after publishing kDone, and a waiter counts itself before it reads the state (both
// sequentially consistent), so either the waiter sees kDone or the finisher sees the waiter.
std::atomic<int> once_waiters{0};

// Never destroyed: a step may finish on a thread that outlives static destruction.
struct OnceWaitRoom {
  std::mutex mutex;
  std::condition_variable done;
};
OnceWaitRoom& once_wait_room() {
  static OnceWaitRoom* s = new OnceWaitRoom;
  return *s;
}

}  // namespace

void Once::wait_until_done(const std::atomic<std::uint8_t>& state) {
  OnceWaitRoom& s = once_wait_room();
  once_waiters.fetch_add(1);
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.done.wait(lock, [&] { return state.load() == kDone; });
  }
  once_waiters.fetch_sub(1);
}

void Once::wake_waiters() {
  if (once_waiters.load() == 0) return;
  OnceWaitRoom& s = once_wait_room();
  // Under the mutex: a waiter between its check of the state and its wait holds it, so the
  // wake cannot fall between the two.
  std::lock_guard<std::mutex> lock(s.mutex);
  s.done.notify_all();
}

}  // namespace kiln
