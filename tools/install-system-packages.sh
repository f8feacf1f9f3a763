#!/bin/sh
# Install the Debian packages listed in $1 (one name per line, # comments) that are missing.
# Needs root or sudo; otherwise names what to install and stops.
set -eu
list="${1:-tools/system-packages.txt}"
[ -f "$list" ] || exit 0
missing=""
for package in $(sed -e 's/#.*//' "$list"); do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $package"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "bemore needs these Debian packages:$missing — install them with apt-get (as root)." >&2
    exit 1
fi
echo "Installing Debian packages:$missing"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
