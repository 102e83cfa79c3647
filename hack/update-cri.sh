#!/usr/bin/env bash
# Regenerates the Python modules of the CRI contract (machinery/cri/api_pb2*.py, .pyi) from
# machinery/cri/api.proto with grpcio-tools, as upstream's cri-api regenerates api.pb.go.
#   hack/update-cri.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. machinery/cri/api.proto
