"""fact.environment --cuda answers without importing torch (a warm `fact optimize` asks it before anything needs
torch): from the CUDA driver's device count and the installed torch's build."""
from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from fact import environment

REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeDriver:
    def __init__(self, init_status: int, devices: int):
        self.init_status, self.devices = init_status, devices

    def cuInit(self, flags):  # noqa: N802 - the driver's name
        return self.init_status

    def cuDeviceGetCount(self, count_ref):  # noqa: N802
        count_ref._obj.value = self.devices
        return 0


def test_the_answer_comes_without_importing_torch():
    probe = ("import json, sys\nfrom fact import environment\nenvironment.main(['--cuda'])\n"
             "print(json.dumps({'torch_imported': 'torch' in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "python")))
    assert r.returncode == 0, r.stderr
    answer, probe_result = (json.loads(line) for line in r.stdout.splitlines())
    assert isinstance(answer["cuda"], bool)
    assert answer["cuda"] or answer["cuda_reason"]
    assert probe_result == {"torch_imported": False}


def test_driver_devices_and_torch_build_decide(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.11.0+cu130")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(0, 2))
    assert environment.cuda_answer() == {"cuda": True, "cuda_reason": None}
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(0, 0))
    no_device = environment.cuda_answer()
    assert no_device["cuda"] is False and "reports no device" in no_device["cuda_reason"]
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(100, 1))
    assert "cuInit failed" in environment.cuda_answer()["cuda_reason"]

    def missing(name):
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert "cannot be loaded" in environment.cuda_answer()["cuda_reason"]
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeDriver(0, 2))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2.11.0+cpu")
    cpu_torch = environment.cuda_answer()
    assert cpu_torch["cuda"] is False and "CPU-only" in cpu_torch["cuda_reason"]
