#!/usr/bin/env bash
# Install jtcse with its test extras into .venv and run the whole test suite.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh" dev
python -m pytest -q tests "$@"
