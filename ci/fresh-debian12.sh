#!/usr/bin/env bash
# Tries the README's set-up commands as a new user would: a fresh debootstrap minbase Debian 12
# chroot with only git added, a clean clone of this repository's committed HEAD, then the
# command given (default: the README's first set-up command). Needs root and network access to
# Debian's archive and PyPI. The chroot is left in place for a look afterwards.
#   ci/fresh-debian12.sh DIR ['./ci/install-deps.sh && ./ci/demo.sh']
#   KILN_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   KILN_DEBIAN_BASE     an earlier minbase chroot to copy instead of running debootstrap again
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: ci/fresh-debian12.sh DIR [COMMAND]}
command=${2:-./ci/install-deps.sh && ./ci/demo.sh}
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian12: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
[ ! -e "$dir" ] || { echo "fresh-debian12: $dir exists; give a new folder" >&2; exit 2; }

if [ -n "${KILN_DEBIAN_BASE:-}" ]; then
  cp -a "$KILN_DEBIAN_BASE" "$dir"
else
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  debootstrap --variant=minbase bookworm "$dir" "${KILN_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
fi
cp /etc/resolv.conf "$dir/etc/resolv.conf"
# This network's TLS trust, not the project's: where egress goes through an intercepting proxy,
# the host's CA bundle, extra CAs and pip.conf come along, as they would on any machine there.
mkdir -p "$dir/etc/ssl/certs" "$dir/usr/local/share/ca-certificates"
[ -f /etc/ssl/certs/ca-certificates.crt ] && cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/"
cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/" 2>/dev/null || true
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$dir/etc/pip.conf"
mount -t proc proc "$dir/proc"
mount --rbind /dev "$dir/dev"
mount -t sysfs sysfs "$dir/sys"
trap 'umount -R "$dir/dev" "$dir/proc" "$dir/sys" 2>/dev/null || true' EXIT

chroot "$dir" apt-get install -y -qq git >/dev/null 2>&1 ||
  { chroot "$dir" apt-get update -qq >/dev/null && chroot "$dir" apt-get install -y -qq git >/dev/null; }
git clone -q "$repo" "$dir/root/kiln"
echo "fresh-debian12: $(chroot "$dir" sh -c '. /etc/os-release; echo $PRETTY_NAME'), commit $(git -C "$repo" rev-parse --short HEAD), no GPU, no /usr/local/cuda: $command"
start=$SECONDS
set +e
chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 \
  bash -c "cd /root/kiln && $command"
rc=$?
echo "fresh-debian12: exit $rc after $((SECONDS - start)) s"
exit $rc
