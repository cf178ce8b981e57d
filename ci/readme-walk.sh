#!/usr/bin/env bash
# Runs every ```sh block of README.md, top to bottom, as a reader would type them, stopping at
# the first line that fails. The two set-up commands are left out (run them first: the blocks
# use the demo's build); everything else runs, including `cmake --install --prefix /usr/local`
# and `ldconfig`, so run it as root on a machine you do not mind installing kiln on (the chroot
# of ci/fresh-debian12.sh, say). Files the blocks write (keys, archives, a store, a venv) go to
# a scratch folder that sees the repository's top-level entries (build/, examples/, packager/
# for `pip install packager/python`, which builds from the whole tree) through links.
#   ci/readme-walk.sh [README]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
readme=${1:-$root/README.md}
[ -f "$root/build/demo/matmul-relu.kiln" ] || { echo "readme-walk: run ./ci/demo.sh first" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-readme-walk.XXXXXX")
ln -s "$root"/* "$work/"
ln -s "$root/.venv" "$work/"  # ci/install-deps.sh's venv (Triton, NumPy), where the README installs the wheel to export
python3 - "$readme" > "$work/walk.sh" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)
print("set -euo pipefail")
for block in blocks:
    if block.lstrip().startswith("./ci/install-deps.sh"):
        continue  # the set-up commands: run before the walk
    print(block)
EOF
echo "readme-walk: $(grep -c '^```sh' "$readme") shell blocks in $readme (the set-up commands left out), in $work"
cd "$work"
bash -v walk.sh
echo "readme-walk: every line ran"
