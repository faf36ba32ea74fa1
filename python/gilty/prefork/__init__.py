"""Kept import path `gilty.prefork`: the code lives in `gilty.memory.prefork`; this is the same module object."""

import sys

import gilty.memory.prefork as _module

sys.modules[__name__] = _module
