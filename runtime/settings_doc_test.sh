#!/usr/bin/env bash
# The docs' table of settings is the one runtime/settings_table.h makes.
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE"
runtime/settings_doc --check docs/configuration.md
