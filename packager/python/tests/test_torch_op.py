"""kiln.torch_op: a kiln kernel as a PyTorch custom op, eager and under torch.compile. Without a
GPU every call takes the reference route (this file's CPU tests); on a GPU (`gpu` marker) the
same model runs natively and on the reference route and the outputs are compared."""
import os

import pytest

torch = pytest.importorskip("torch")
import kiln  # noqa: E402
import kiln.torch_op  # noqa: E402

ARCHIVES = os.environ["KILN_TEST_ARCHIVES"]
TRUST = os.path.join(os.environ["KILN_TEST_KEYS"], "test.pub")


def matmul_relu_reference(a, b, c, m, n, k):
    c.copy_(torch.relu(a.view(m, k) @ b.view(k, n)).view(-1))


class Model(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m * n, device=a.device, dtype=a.dtype)
        self.op(a.reshape(-1), b.reshape(-1), c, m, n, k)
        return c.view(m, n) * 2 + 1  # something around the op for the compiler to fuse


_counter = [0]


def make_op(runtime):
    _counter[0] += 1
    archive = runtime.open(os.path.join(ARCHIVES, "matmul-relu.kiln"))
    return kiln.torch_op.custom_op(f"kiln_test::matmul_relu_{_counter[0]}", archive, "matmul_relu",
                                   matmul_relu_reference)


def test_the_schema_mutates_what_the_kernel_writes():
    op = make_op(kiln.Runtime(TRUST, cuda_driver_path="libcuda-absent-for-this-test.so.1"))
    assert op.schema == "(Tensor a, Tensor b, Tensor(a!) c, int m, int n, int k) -> ()"
    assert op.written == ["c"]


@pytest.mark.parametrize("compiled", [False, True])
def test_on_the_cpu_the_op_runs_the_reference(compiled):
    op = make_op(kiln.Runtime(TRUST, cuda_driver_path="libcuda-absent-for-this-test.so.1"))
    model = Model(op)
    run = torch.compile(model, fullgraph=True) if compiled else model
    torch.manual_seed(0)
    a, b = torch.rand(64, 64) - 0.5, torch.rand(64, 64) - 0.5
    got = run(a, b)
    assert torch.allclose(got, torch.relu(a @ b) * 2 + 1)
    assert op.routes["reference"] >= 1 and op.routes["native"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", [False, True])
def test_native_and_reference_routes_agree(compiled):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(0)
    a, b = torch.rand(256, 256, device="cuda") - 0.5, torch.rand(256, 256, device="cuda") - 0.5
    outputs = {}
    # the same model natively (this GPU's kernel) and on the reference route (a runtime whose
    # kernel cannot resolve: no driver), the tensors on the GPU either way
    for route, runtime in (("native", kiln.Runtime(TRUST)),
                           ("reference", kiln.Runtime(TRUST, cuda_driver_path="libcuda-absent-for-this-test.so.1"))):
        op = make_op(runtime)
        model = Model(op)
        run = torch.compile(model, fullgraph=True) if compiled else model
        outputs[route] = run(a, b)
        torch.cuda.synchronize()
        assert op.routes == {route: 1}, op.routes
    assert torch.allclose(outputs["native"], outputs["reference"], rtol=1e-4, atol=1e-4)
    assert torch.allclose(outputs["native"], torch.relu(a.double() @ b.double()).float() * 2 + 1, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_strided_output_goes_to_the_reference():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    op = make_op(kiln.Runtime(TRUST))
    a, b = torch.rand(64, 64, device="cuda"), torch.rand(64, 64, device="cuda")
    c = torch.zeros(2 * 64 * 64, device="cuda")[::2]  # every other element: not contiguous
    op(a.reshape(-1), b.reshape(-1), c, 64, 64, 64)
    assert op.routes == {"reference": 1}, op.routes
    assert torch.allclose(c.view(64, 64), torch.relu(a @ b), rtol=1e-4, atol=1e-4)
