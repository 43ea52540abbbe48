#!/usr/bin/env bash
# The README's Configuration table is the one runtime/settings_table.h makes.
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE"
runtime/settings_doc --check README.md
