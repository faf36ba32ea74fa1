"""Kept import path `gilty.otel`: the code lives in `gilty.observe.otel`; this is the same module object."""

import sys

import gilty.observe.otel as _module

sys.modules[__name__] = _module
