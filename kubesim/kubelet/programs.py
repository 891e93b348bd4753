"""What a container's process does, by its image: the one place the kubelet asks.

- NVIDIA's CUDA samples (`cuda.py`): print at once what the sample prints, exit after 3 s.
- `ghcr.io/gpu-portal/train-sim` (kubesim's own training-like image): prints one progress line
  per step (`epoch 1/2 step 3/10 loss 1.8421`, `--step-seconds` apart, default 1), then exits
  with the code `--exit-code` gives (default 0). `--steps` (default 10), `--epochs` (default 1),
  `--load` (0.0-1.0, default 0.85): how busy it keeps its GPUs (dcgm-exporter's activity).
- A Jupyter image (`quay.io/jupyter/*-notebook`, `jupyter/*-notebook`): JupyterLab's server,
  which keeps running, answers HTTP on its port (8888, `--ServerApp.port`) through the API
  server's pod proxy (`notebook.py`), and exits 0 on SIGTERM as jupyter_server does. It
  barely touches its GPU (a notebook waiting for its user).
- `sleep infinity` (any image) runs until stopped, `sleep N` N seconds, then exits 0.
- Any other image the node can pull runs its command for a while (5 s) and exits 0.

What a program does to its GPUs (`gpu_activity`, `gpu_memory_fraction`) drives the node's
dcgm-exporter (`gpu_metrics.py`): the CUDA samples a burst while they run, any other program 0.

Every duration is simulated time (divided by the kubelet's speed by the caller).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesim.kubelet import cuda
from kubesim.kubelet.images import canonical, parse

TRAIN_IMAGE = "ghcr.io/gpu-portal/train-sim"
TRAIN_LOAD = 0.85
SAMPLE_ACTIVITY, SAMPLE_MEMORY = 0.9, 0.01  # vectorAdd: a few MiB of vectors and a context
NOTEBOOK_ACTIVITY = 0.01
NOTEBOOK_REPOSITORY = re.compile(r"^(quay\.io/jupyter|docker\.io/jupyter)/[a-z0-9-]*notebook$")
OTHER_SECONDS = 5.0
FOREVER = math.inf


@dataclass
class Program:
    """A container's process: lines it prints (simulated seconds after its start, text),
    how long it runs (FOREVER: until stopped) and the code it then exits with."""

    output: list[tuple[float, str]]
    exit_code: int
    seconds: float
    stops_on_sigterm: bool = False  # handles SIGTERM and exits 0 (else PID 1 ignores it)
    server: Any = None  # what answers HTTP on the container's ports (notebook.Server)
    printed: int = field(default=0)  # how many lines of `output` the kubelet appended
    gpu_activity: float = 0.0  # the share of time its GPUs' engines are busy, 0-1
    gpu_memory_fraction: float = 0.0  # the share of their framebuffer it holds

    @property
    def lines(self) -> list[str]:
        return [line for _, line in self.output]

    def due(self, elapsed: float) -> list[str]:
        """The lines printed by `elapsed` simulated seconds not handed out yet."""
        due = [line for at, line in self.output[self.printed :] if at <= elapsed]
        self.printed += len(due)
        return due

    def next_line_at(self) -> float:
        return self.output[self.printed][0] if self.printed < len(self.output) else FOREVER


def start(container: dict, devices: Sequence[Any], registries: Any, run_seconds: float) -> Program:
    """The process a container of its image runs, on the GPUs in `devices`."""
    image = canonical(registries or {}, container.get("image", ""))
    repository = parse(image).repository
    argv = _argv(container)
    if argv[:1] == ["sleep"] and len(argv) == 2:
        return sleeping(argv[1])
    if image.startswith(cuda.SAMPLE_IMAGE):
        sample = cuda.run_image(image, devices)
        output = [(0.0, line) for line in sample.lines]
        program = Program(output, sample.exit_code, run_seconds)
        if devices:
            program.gpu_activity, program.gpu_memory_fraction = SAMPLE_ACTIVITY, SAMPLE_MEMORY
        return program
    if repository == TRAIN_IMAGE:
        return training(argv, devices)
    if NOTEBOOK_REPOSITORY.match(repository):
        from kubesim.kubelet import notebook

        program = notebook.start(container, argv)
        program.gpu_activity = NOTEBOOK_ACTIVITY if devices else 0.0
        return program
    return Program([], 0, OTHER_SECONDS)


def sleeping(duration: str) -> Program:
    """`sleep infinity` never exits by itself; `sleep N` exits 0 after N seconds (coreutils
    and busybox). As PID 1 without a handler it ignores SIGTERM: a deletion ends it at the
    grace period."""
    if duration == "infinity":
        return Program([], 0, FOREVER)
    try:
        return Program([], 0, max(float(duration.rstrip("s")), 0.0))
    except ValueError:
        return Program([(0.0, f"sleep: invalid time interval '{duration}'")], 1, 0.0)


def _argv(container: dict) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def option(argv: list[str], *names: str) -> str | None:
    """The value of `--name value` or `--name=value` in argv (the last one given)."""
    found = None
    for index, word in enumerate(argv):
        for name in names:
            if word == name and index + 1 < len(argv):
                found = argv[index + 1]
            elif word.startswith(name + "="):
                found = word[len(name) + 1 :]
    return found


def _number(argv: list[str], name: str, default: float) -> float:
    value = option(argv, name)
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def training(argv: list[str], devices: Sequence[Any]) -> Program:
    """train-sim: one line per step with a falling loss, then the exit code asked for."""
    steps = max(int(_number(argv, "--steps", 10)), 1)
    epochs = max(int(_number(argv, "--epochs", 1)), 1)
    step_seconds = max(_number(argv, "--step-seconds", 1.0), 0.0)
    exit_code = int(_number(argv, "--exit-code", 0)) % 256
    load = min(max(_number(argv, "--load", TRAIN_LOAD), 0.0), 1.0)
    if devices:
        names = ", ".join(device.product_name for device in devices)
        output = [(0.0, f"train-sim: {len(devices)} GPU(s) visible: {names}")]
    else:
        output = [(0.0, "train-sim: no GPU visible, training on CPU")]
    total = steps * epochs
    for index in range(total):
        epoch, step = divmod(index, steps)
        loss = 2.3026 * math.exp(-2.5 * (index + 1) / total) + 0.05
        line = f"epoch {epoch + 1}/{epochs} step {step + 1}/{steps} loss {loss:.4f}"
        output.append(((index + 1) * step_seconds, line))
    end = total * step_seconds
    if exit_code:
        output.append((end, f"train-sim: failed, exiting with code {exit_code}"))
    else:
        output.append((end, "train-sim: done"))
    program = Program(output, exit_code, end)
    if devices:
        program.gpu_activity, program.gpu_memory_fraction = load, 0.1 + 0.8 * load
    return program
