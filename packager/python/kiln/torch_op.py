"""A kiln kernel as a PyTorch custom operator (torch.library), so that a model calls it like any
op, eagerly or under torch.compile:

    import kiln, kiln.torch_op
    rt = kiln.Runtime(trust="keys/")
    archive = rt.open("softmax.kiln")
    softmax = kiln.torch_op.custom_op("mylib::softmax", archive, "softmax", reference=torch_softmax)
    y = torch.empty_like(x)
    softmax(y, x, m, n)                       # or torch.ops.mylib.softmax(y, x, m, n)

The op takes the kernel's call (its manifest `params`, in order) and mutates the tensors the
kernel writes (access "write" / "read_write"); it returns nothing. Each call goes:

  * natively through libkiln when every tensor is on one CUDA device whose kernel resolved to a
    verified code object, and is contiguous and 16-byte aligned (what a kiln package's kernels
    assume: they are compiled for row-major tensors from PyTorch's allocator); libkiln itself
    sends a call that matches no declared shape to the same reference;
  * to `reference` otherwise (CPU tensors, a device with no fitting kernel, a strided view).

`op.routes` counts the calls by route. The fake (meta) implementation does nothing, as the op
returns nothing: under torch.compile, PyTorch functionalises the mutation.
"""
import collections
import threading

import torch

_SCALAR_SCHEMA = {1: "int", 2: "int", 3: "int", 4: "int", 5: "int", 6: "int", 7: "int", 8: "int",
                  9: "float", 10: "float", 11: "float", 12: "float", 13: "float", 14: "float"}


class KilnOp:
    """The custom op; call it like the op itself."""

    def __init__(self, qualname, archive, kernel, reference):
        self.qualname, self.archive, self.kernel_name, self.reference = qualname, archive, kernel, reference
        self._kernels, self._lock = {}, threading.Lock()
        self.routes = collections.Counter()
        params = archive.kernel(kernel, 0).params  # the call is the same on every device
        self.params = params
        self.written = [p["name"] for p in params if p["pointer"] and p["access"] != "read"]
        if not self.written:
            raise ValueError(f"kernel {kernel!r} writes no tensor (no parameter with access write or read_write): "
                             "a custom op of it would have no effect")
        self._pointer = [p["pointer"] for p in params]
        # libkiln's own reference route (an undeclared shape) runs the same function.
        archive._runtime.register_reference(kernel, lambda *args, info: reference(*args))
        aliases = iter("abcdefghijklmnopqrstuvwxyz")
        fields = []
        for p in params:
            if p["pointer"]:
                fields.append(f"Tensor({next(aliases)}!) {p['name']}" if p["name"] in self.written else f"Tensor {p['name']}")
            else:
                fields.append(f"{_SCALAR_SCHEMA[p['dtype']]} {p['name']}")
        self.schema = f"({', '.join(fields)}) -> ()"
        self._op = torch.library.custom_op(qualname, self._impl, mutates_args=tuple(self.written), schema=self.schema)
        self._op.register_fake(self._fake)

    def kernel(self, device):
        with self._lock:
            if device not in self._kernels:
                self._kernels[device] = self.archive.kernel(self.kernel_name, device)
            return self._kernels[device]

    def native_kernel_for(self, args):
        """The kiln kernel this call may launch, or None (with why) when it must go to the reference."""
        tensors = [a for a, is_pointer in zip(args, self._pointer) if is_pointer]
        device = tensors[0].device
        if device.type != "cuda":
            return None, f"tensors on {device}"
        for t in tensors:
            if t.device != device:
                return None, "tensors on several devices"
            if not t.is_contiguous() or t.data_ptr() % 16:
                return None, "a tensor is not contiguous and 16-byte aligned"
        k = self.kernel(device.index)
        if k.route not in ("native", "ptx-jit"):
            return None, f"{k.reason}: {k.reason_text}"
        return k, None

    def _impl(self, *args):
        k, _ = self.native_kernel_for(args)
        if k is None:
            self.reference(*args)
            self.routes["reference"] += 1
            return
        self.routes[k(*args)] += 1

    @staticmethod
    def _fake(*args):
        return None

    def __call__(self, *args):
        return self._op(*args)


def custom_op(qualname, archive, kernel, reference):
    """Registers `qualname` ("namespace::name") as a PyTorch op running `kernel` of `archive`
    through kiln, and `reference(*call)` (PyTorch, in place) where kiln cannot; returns the op."""
    return KilnOp(qualname, archive, kernel, reference)
