#!/usr/bin/env bash
# Prints the folder of the pinned tool binaries (built by `make tools`).
# Exits 1 with a hint when they have not been built yet.
source "$(dirname "$0")/../lib/common.sh"
[[ -f $TOOLS_DIR/.complete ]] || die "the pinned tools are not built: run make tools"
echo "$TOOLS_BIN"
