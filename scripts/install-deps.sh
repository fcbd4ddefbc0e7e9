#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs everything stoker needs to build and test, from Debian 12's packages.
# Idempotent and non-interactive; needs root (or sudo). Does nothing when all is present.
# PyTorch (Debian's 1.13, CPU) runs the torch tests, the two-rank DDP example and the CPU
# smoke run of bench/train.py in scripts/test.sh; mate-backgrounds' photographs make the demo's
# sample and the data of tests/test_bench_scripts.sh; clang-format (14) runs
# scripts/check-format.sh.
set -eu

PKGS="build-essential cmake pkg-config git
liburing-dev libturbojpeg0-dev libjpeg62-turbo-dev libhdf5-dev zlib1g-dev libpng-dev
libspng-dev libcurl4-openssl-dev nginx-light
clang libclang-rt-14-dev clang-format
python3 python3-numpy python3-pytest python3-h5py python3-pil
python3-venv python3-wheel python3-setuptools
python3-torch python3-torchvision
mate-backgrounds"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo > /dev/null || { echo "install-deps: run as root (missing:$missing)"; exit 1; }
    SUDO=sudo
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q > /dev/null
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing > /tmp/stoker-apt.log 2>&1 ||
    { tail -n 30 /tmp/stoker-apt.log; echo "install-deps: apt-get install failed"; exit 1; }
echo "install-deps: done"
