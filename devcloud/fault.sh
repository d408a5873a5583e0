#!/bin/sh
# Fault knobs of the devcloud (docs/devcloud.md): devcloud/fault.sh <knob> [node-index]
exec python3 "$(dirname "$0")/devcloud.py" fault "$@"
