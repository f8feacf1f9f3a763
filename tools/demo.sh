#!/bin/sh
# The main job on the bundled sample, as far as the capabilities that have landed go.
set -eu
bin=.venv/bin
echo "== bemore $($bin/bemore --version | sed 's/.*version //'): checking the bundled configuration"
$bin/bemore config check
