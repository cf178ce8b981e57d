#!/usr/bin/env python3
"""On the GPU: `kiln preflight --target sm_XY --driver D` (judged from the archive alone) against
`kiln preflight` on the real device, for every archive given, kernel by kernel (route, reason,
chosen code object). The one disagreement that is expected is a code object the device's driver
refuses to load (a missing symbol): the described target cannot know that; it is shown, not failed.

    gpu_preflight_agree.py KILN TRUST TARGET DRIVER ARCHIVE...
"""
import json
import subprocess
import sys

kiln, trust, target, driver = sys.argv[1:5]
failures = 0
print(f"{'archive':34} {'kernel':20} {'this device':34} {'--target ' + target:34} verdict")
for path in sys.argv[5:]:
    name = path.rsplit("/", 1)[-1]
    device = subprocess.run([kiln, "preflight", path, "--trust", trust, "--json"], capture_output=True, text=True)
    described = subprocess.run([kiln, "preflight", path, "--trust", trust, "--json", "--target", target, "--driver", driver],
                               capture_output=True, text=True)
    if device.returncode or described.returncode:
        same = device.returncode == described.returncode
        failures += not same
        print(f"{name:34} {'-':20} {'exit ' + str(device.returncode):34} {'exit ' + str(described.returncode):34} "
              f"{'agree (both refuse the archive)' if same else 'DISAGREE'}")
        continue
    real = {k["kernel"]: k for k in json.loads(device.stdout)["kernels"]}
    judged = {k["kernel"]: k for k in json.loads(described.stdout)["targets"][0]["kernels"]}
    for kernel in sorted(real):
        a, b = real[kernel], judged[kernel]
        sa, sb = f"{a['route']} {a['reason']} {a['target']}", f"{b['route']} {b['reason']} {b['target']}"
        if sa == sb:
            verdict = "agree"
        elif a["reason"] == "load-failed" and b["route"] in ("native", "ptx-jit"):
            verdict = "expected: the driver refused the code"
        else:
            verdict = "DISAGREE"
            failures += 1
        print(f"{name:34} {kernel:20} {sa:34} {sb:34} {verdict}")
print(f"{failures} disagreement(s)")
sys.exit(1 if failures else 0)
