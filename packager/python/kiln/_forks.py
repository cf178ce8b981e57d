"""Locks that a forked child can always take.

os.fork() copies a lock as it is at that moment: one held by another thread of the parent stays
held in the child, where no thread will ever release it, and the child's first lookup waits on it
for good (a `multiprocessing` worker forked while a thread hashes TileLang's libraries, or while
Inductor's threads load kernels through kiln, would hang at its first kernel). Two kinds here:

- `Lock()` guards Python state alone. The child gets it unheld: the state it guards is whole
  between statements, and work a parent's thread had under way (the TileLang build's hash) is not
  found in the child, which does it again.
- `Lock(fork_waits=True)` is held around calls into libkiln, whose own locks a child cannot
  repair: the fork waits until no thread holds it (it is taken before the fork and released after
  it, in both processes). Such a lock is never held by the thread that forks, nor while another
  of its kind is taken (the fork takes them one after another); the other kind may be taken inside
  it (libkiln's loader is), since the fork takes none of those.
"""
import os
import threading
import weakref

_locks = weakref.WeakSet()
_taken_for_fork = []


class Lock:
    """A threading.Lock (a context manager) that a fork never leaves held in the child."""

    __slots__ = ("_inner", "fork_waits", "__weakref__")

    def __init__(self, fork_waits=False):
        self._inner = threading.Lock()
        self.fork_waits = fork_waits
        _locks.add(self)

    def __enter__(self):
        self._inner.acquire()
        return self

    def __exit__(self, *exc):
        self._inner.release()

    def locked(self):
        return self._inner.locked()


def _before_fork():
    waiting = [lock for lock in list(_locks) if lock.fork_waits]
    for lock in waiting:
        lock._inner.acquire()
    _taken_for_fork[:] = waiting


def _after_fork_in_parent():
    for lock in _taken_for_fork:
        lock._inner.release()
    _taken_for_fork.clear()


def _after_fork_in_child():
    taken = set(map(id, _taken_for_fork))
    for lock in list(_locks):
        if id(lock) in taken:
            lock._inner.release()  # taken by this thread, the child's only one, for the fork
        elif lock._inner.locked():
            lock._inner = threading.Lock()  # held by a thread the child does not have
    _taken_for_fork.clear()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
