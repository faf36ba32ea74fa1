"""`import gilty` works without the native extension; its names are forwarded lazily."""

import subprocess
import sys
import types

import gilty
import pytest


def test_import_without_native_extension():
    # A fresh interpreter where importing gilty._native fails: gilty and its pure parts still import.
    code = (
        "import sys; sys.modules['gilty._native'] = None\n"
        "import gilty, gilty.sampling.session, gilty.sampling.analysis, gilty.report.recording.text, gilty.report.recording.json, gilty.cli\n"
        "print(gilty.__version__)\n"
        "try:\n    gilty.Target\nexcept ImportError:\n    print('no native')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": ":".join(sys.path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "no native"


def test_native_names_are_forwarded(monkeypatch):
    fake = types.ModuleType("gilty._native")
    fake.Target = object
    monkeypatch.setitem(sys.modules, "gilty._native", fake)
    monkeypatch.delattr(gilty, "_native", raising=False)
    assert gilty.Target is object


def test_unknown_attribute():
    with pytest.raises(AttributeError):
        _ = gilty.no_such_name
