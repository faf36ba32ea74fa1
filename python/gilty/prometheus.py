"""Kept import path `gilty.prometheus`: the code lives in `gilty.observe.prometheus`; this is the same module object."""

import sys

import gilty.observe.prometheus as _module

sys.modules[__name__] = _module
