#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs a built tree into a temporary prefix, then compiles and runs a small C and a
# small C++ program against it twice: through find_package(stoker) and through
# pkg-config stoker.   usage: check-install.sh BUILD_DIR
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
echo "installed into a temporary prefix: $(cd "$prefix" && find . -type f | wc -l) files"

# find_package(stoker)
cmake -S "$here/consumer" -B "$tmp/fp" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/fp.log" 2>&1 ||
    { cat "$tmp/fp.log"; exit 1; }
cmake --build "$tmp/fp" > "$tmp/fp-build.log" 2>&1 || { cat "$tmp/fp-build.log"; exit 1; }
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$tmp/fp/consumer_c"
LD_LIBRARY_PATH="$prefix/lib:$prefix/lib/x86_64-linux-gnu" "$tmp/fp/consumer_cxx"
"$tmp/fp/consumer_c_static"
echo "find_package(stoker): C, C++ and static C consumers built and ran"

# pkg-config stoker
pcdir=$(dirname "$(find "$prefix" -name stoker.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
cc -std=c11 -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$tmp/pc_c" $(pkg-config --cflags --libs stoker)
c++ -std=c++17 -Wall -Wextra -Werror "$here/consumer/consumer.cpp" -o "$tmp/pc_cxx" $(pkg-config --cflags --libs stoker)
cc -std=c11 -Wall -Wextra -Werror "$here/consumer/consumer.c" -o "$tmp/pc_c_static" \
    $(pkg-config --cflags stoker) -Wl,-Bstatic $(pkg-config --libs-only-L stoker) -lstoker -Wl,-Bdynamic \
    $(pkg-config --static --libs stoker | sed 's/-lstoker//')
LD_LIBRARY_PATH="$(pkg-config --variable=libdir stoker)" "$tmp/pc_c"
LD_LIBRARY_PATH="$(pkg-config --variable=libdir stoker)" "$tmp/pc_cxx"
"$tmp/pc_c_static"
echo "pkg-config stoker: C, C++ and static C consumers built and ran"
