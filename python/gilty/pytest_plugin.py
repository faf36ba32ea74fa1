"""Kept import path `gilty.pytest_plugin`: the code lives in `gilty.observe.pytest_plugin`; this is the same module object."""

import sys

import gilty.observe.pytest_plugin as _module

sys.modules[__name__] = _module
