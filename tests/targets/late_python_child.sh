#!/bin/bash
# A shell wrapper that starts a Python child after a 1 s delay: `late_python_child.sh PYTHON`.
# Prints "ready" at once (before the child exists); the child spins until the wrapper is gone (it is a child, not an exec).
echo ready
sleep 1
"$1" "$(dirname "$0")/late_child.py"
