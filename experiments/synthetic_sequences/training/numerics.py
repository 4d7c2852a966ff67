"""The numerics a run trained under: what decides its floats beside its seed and inputs.

metadata.json records them (`numerics`) and the verdict names them (analysis/records/run_files.numerics_label): the same seed
gives other floats under another kernel set (ATEN_CPU_CAPABILITY), another CPU, thread count, dtype or torch build.
"""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name ('AMD EPYC 7B13'), from /proc/cpuinfo where there is one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def execution_path(chunk: dict) -> dict:
    """How a run's steps ran, from its chunk (training/chunk.chunk_description): eager (nothing is compiled), how many
    seeds shared each forward and backward pass (lockstep; 1 when they trained one after another) and how many seeds its
    process trained. Seeds per pass can move floats; seeds per process cannot (tests/test_lockstep.py)."""
    seeds_per_pass = len(chunk["seeds"])
    return {
        "compiled": False,
        "chunk_training": chunk["training"],
        "seeds_per_pass": seeds_per_pass,
        "seeds_per_process": len(chunk.get("job_seeds", chunk["seeds"])),
    }


def numerics(device, execution: dict) -> dict:
    """The kernel set (torch.backends.cpu.get_cpu_capability(), or the CUDA device), CPU model, threads, dtype and
    torch build of a run on `device`, its execution path (execution_path), and how the Gaussian posteriors' cross
    densities of its continuous I(x;z) round (information.GAUSSIAN_CROSS_DENSITY; absent in runs before it, whose
    validation metrics differ by up to about 3e-8 and whose training is the same)."""
    import torch

    from core.disentanglement.information import GAUSSIAN_CROSS_DENSITY

    device = torch.device(device)
    record = {
        "device": str(device),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
        "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "execution": execution,
        "gaussian_cross_density": GAUSSIAN_CROSS_DENSITY,
    }
    if device.type == "cuda":
        record["cuda_device"] = torch.cuda.get_device_name(device)
    return record
