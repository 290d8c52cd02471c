#!/bin/bash
# Builds ns-3.37 (the version Debian ships in libns3-dev) with ns-3's `optimized` profile
# (-O3 -march=native, no asserts, no logging), only the modules tools/ns3/dumbbell.cc
# uses, from Debian's source tarball (checksum checked). Debian's own build is the
# `release` profile with logging compiled in; this one is the fastest ns-3 can be, so the
# speed comparison (tools/sim-speed/vs-ns3.sh) is not won against a handicapped peer.
# About 20 minutes on two cores.
#
#   tools/ns3/build-optimized.sh /opt/ns3      # then:
#   NS3_PREFIX=/opt/ns3/ns-allinone-3.37/ns-3.37/build tools/sim-speed/vs-ns3.sh 5
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 DIRECTORY (where to download and build ns-3.37)" >&2
  exit 2
fi
dir=$1
tarball=ns3_3.37.orig.tar.bz2
sha256=dfa5ca1994ff3dbe1d4b23cef54e05e6079f5707a2ed6055f717bdd5b458c38d
mkdir -p "$dir"
cd "$dir"
if [ ! -e "$tarball" ]; then
  curl -fsSL -o "$tarball.part" "http://deb.debian.org/debian/pool/main/n/ns3/$tarball"
  mv "$tarball.part" "$tarball"
fi
echo "$sha256  $tarball" | sha256sum -c --quiet
[ -d ns-allinone-3.37 ] || tar xjf "$tarball"
cd ns-allinone-3.37/ns-3.37
./ns3 configure --build-profile=optimized --disable-logs --disable-examples --disable-tests \
  --disable-python-bindings \
  --enable-modules="core;network;internet;point-to-point;applications;traffic-control"
./ns3 build
echo "built: NS3_PREFIX=$PWD/build"
