#!/usr/bin/env bash
# Builds .venv-peer: hayakoe 1.3.1 (a published SBV2 JP-Extra runtime, AGPL) used ONLY as an oracle
# for golden G2P data (tools/peer/g2p_golden.py). Nothing in the project imports it.
#   tools/peer/make_venv.sh [path/to/hayakoe-1.3.1-py3-none-any.whl]
# Without an argument the wheel comes from PyPI. CPU only: hayakoe needs no torch for G2P.
set -euo pipefail
cd "$(dirname "$0")/../.."

HAYAKOE_SPEC=${1:-hayakoe==1.3.1}
PYTHON=${PYTHON:-python3.11}

[ -x .venv-peer/bin/python ] || "$PYTHON" -m venv .venv-peer
.venv-peer/bin/python -m pip install -q --progress-bar off --upgrade pip
.venv-peer/bin/python -m pip install -q --progress-bar off "$HAYAKOE_SPEC"
.venv-peer/bin/python -c 'import hayakoe.nlp.japanese.g2p, pyopenjtalk; print("hayakoe ready")'
