#!/usr/bin/env bash
# Builds the book (docs/ → target/book) with mdBook and checks every link of
# the book and the README (scripts/check-docs.py). Installs mdBook (pinned,
# without its web server) into ~/.cargo/bin when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
MDBOOK_VERSION=0.5.4
if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
  echo "installing mdbook $MDBOOK_VERSION (cargo install, a few minutes once)"
  cargo install --quiet --locked mdbook --version "$MDBOOK_VERSION" \
    --no-default-features --features search
fi
mdbook build docs
python3 scripts/check-docs.py
