#!/usr/bin/env bash
# CIFAR-10 for `make demo`, like the other prerequisites: found, built or downloaded, or a
# stop within seconds with one line saying how to provide it.
#   workflow/cifar10.sh check ROOT          before the venv exists: is there a way to get it?
#   workflow/cifar10.sh get ROOT PYTHON     with the venv's python: build or download it
# Sources, in order: ROOT/cifar-10-batches-py already there; the team's offline copy
# (../shared/data/make_cifar10_batches.py beside the checkout); the official release
# (torchvision, MD5-checked, with a progress bar) when its server answers.
set -uo pipefail

ACTION=${1:?check or get}
ROOT=${2:?the data root, e.g. data/cifar10}
PYTHON=${3:-python3}
OFFLINE=../shared/data/make_cifar10_batches.py
# torchvision's source of the release; CIFAR10_URL changes only the address checked (tests)
URL=${CIFAR10_URL:-https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz}

have_copy() { [ -f "$ROOT/cifar-10-batches-py/test_batch" ]; }

reachable() {  # the release's server, within 5 s (no network: a quick no)
    python3 - "$URL" <<'EOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=5)
EOF
}

case "$ACTION" in
check)
    have_copy || [ -f "$OFFLINE" ] || reachable && exit 0
    echo "make demo: CIFAR-10 is not in $ROOT/cifar-10-batches-py, there is no offline copy" \
        "($OFFLINE) and $URL cannot be reached: extract cifar-10-python.tar.gz into $ROOT" \
        "and run make demo again" >&2
    exit 1
    ;;
get)
    have_copy && exit 0
    if [ -f "$OFFLINE" ]; then  # with the manifest that verifies it (initmem.training.data)
        echo "CIFAR-10: building $ROOT from the offline copy ($OFFLINE)"
        exec "$PYTHON" -m initmem cifar10-copy "$ROOT" --builder "$OFFLINE"
    fi
    echo "CIFAR-10: downloading $URL into $ROOT (163 MB, MD5-checked)"
    exec "$PYTHON" -c "import sys; from torchvision.datasets import CIFAR10; \
CIFAR10(sys.argv[1], train=True, download=True)" "$ROOT"
    ;;
*)
    echo "workflow/cifar10.sh: unknown action '$ACTION'; use check or get" >&2
    exit 2
    ;;
esac
