"""Kept import path `gilty.monitor`: the code lives in `gilty.observe.monitor`; this is the same module object."""

import sys

import gilty.observe.monitor as _module

sys.modules[__name__] = _module
