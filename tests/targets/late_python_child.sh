#!/bin/bash
# A shell wrapper that starts a Python child late: `late_python_child.sh PYTHON`. Prints "ready" at once
# (before the child exists), then waits for a line on stdin (the test sends it once gilty records) and
# starts the child 0.5 s after it. The child spins until the wrapper is gone (it is a child, not an exec).
echo ready
read -r _go
sleep 0.5
"$1" "$(dirname "$0")/late_child.py"
