"""Devices and numeric precision, checked up front: :func:`resolve_device`, :func:`check_precision`,
:func:`autocast`, and the float32 a loss keeps under autocast (:func:`in_float32`).

A device or precision this machine cannot run is a one-line ``ValueError`` before any model loads, never a
CUDA traceback from deep inside torch. torch is imported inside the functions, so importing this module
costs nothing (the command line imports it while it parses options).

Precision names (those of ``--precision``): ``fp32``, ``bf16`` (bfloat16 autocast), ``fp16`` (float16
autocast) and ``auto``: bf16 on a CUDA device that supports it, else fp32. On a CPU that multiplies bfloat16
natively (:func:`native_bf16_cpu`: AVX512-BF16 or AMX, where the default pipeline takes 0.6 of fp32's time) ``auto``
is bf16 too (:data:`CPU_AUTO_BF16`); on other CPUs bf16 is emulated and slower, and ``auto`` is fp32 there. ``fp16`` needs a CUDA device (on the CPU torch's float16 autocast is slow and its
gradients need a loss scaler); ``bf16`` needs a CUDA device that supports it (compute capability 8.0+, e.g. A100,
H100) or the CPU. Unlike a check of ``torch.cuda.is_available()`` alone, every check here is against the device
the work runs on: ``fp16`` with ``--device cpu`` is refused on a machine with a GPU too.
"""

from __future__ import annotations

import contextlib
import typing
from typing import Literal

from jtcse.errors import SettingError

Precision = Literal["auto", "fp32", "fp16", "bf16"]
"""A precision name (the settings' ``precision``)."""
PRECISIONS = typing.get_args(Precision)


def best_device() -> str:
    """``cuda`` when a CUDA device is visible, else ``mps`` when available, else ``cpu``."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def resolve_device(name: str | None = None) -> str:
    """``name`` checked against this machine (``None`` or ``"auto"``: :func:`best_device`).

    Raises ``ValueError`` in one line for a name torch does not know, ``cuda`` without a CUDA device,
    ``cuda:N`` past the visible devices, or ``mps`` where it is absent. Other torch device types (``xpu``,
    ``npu``, ...) are passed on as they are.
    """
    if name is None or name == "auto":
        return best_device()
    import torch

    try:
        parsed = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {name!r}: use cpu, cuda, cuda:N or mps") from None
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {name!r} asked for, but no CUDA device is available here")
        if parsed.index is not None and parsed.index >= count:
            raise ValueError(f"device {name!r} asked for, but only {count} CUDA device(s) are visible")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} asked for, but MPS is not available here")
    return str(name)


CPU_AUTO_BF16 = True
"""Whether ``auto`` is bf16 on a CPU with native bf16. On since the quality check of issue 43 held: the default
pipeline's student, trained under bf16, kept its selection total within fp32's paired seed spread over 3 seeds
(``evaluation/studies/student_keeps.toml``, its precision rows; ``docs/speed.md``). Speed alone did not make it the
default."""

NATIVE_BF16_FEATURES = ("avx512_bf16", "amx_bf16")
"""The CPU features (names of ``torch.cpu.get_capabilities()``) with which oneDNN multiplies bfloat16 natively."""


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 natively: oneDNN (``torch.backends.mkldnn``) is there and the CPU has
    one of :data:`NATIVE_BF16_FEATURES`, as torch detects them (``torch.cpu.get_capabilities()``). The one place
    that asks: ``auto`` is bf16 on the CPU only where this says so."""
    import torch

    capabilities = getattr(torch.cpu, "get_capabilities", None)  # an older torch cannot say: fp32
    if capabilities is None or not torch.backends.mkldnn.is_available():
        return False
    found = capabilities()
    return any(bool(found.get(feature, False)) for feature in NATIVE_BF16_FEATURES)


def _bf16_supported(device: str) -> bool:
    import torch

    with torch.cuda.device(device if ":" in device else 0):
        return torch.cuda.is_bf16_supported()


def check_precision(precision: str, device: str | None = None) -> str:
    """The precision to run on ``device``: ``fp32``, ``bf16`` or ``fp16`` (``auto`` resolved), refused in one
    line where the device cannot run it. ``device`` is resolved first (:func:`resolve_device`), so a missing
    CUDA device is named as such.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use {', '.join(PRECISIONS)}")
    device = resolve_device(device)
    kind = device.split(":", 1)[0]
    if precision == "auto":
        native = _bf16_supported(device) if kind == "cuda" else kind == "cpu" and CPU_AUTO_BF16 and native_bf16_cpu()
        return "bf16" if native else "fp32"
    if precision == "fp16" and kind != "cuda":
        raise SettingError(
            "{precision} fp16 needs a CUDA device, not {device!r}; use bf16 on the CPU, or fp32",
            ["precision"],
            device=device,
        )
    if precision == "bf16" and kind == "mps":
        raise SettingError(
            "{precision} bf16 needs a CUDA device or the CPU, not {device!r}; use fp32", ["precision"], device=device
        )
    if precision == "bf16" and kind == "cuda" and not _bf16_supported(device):
        import torch

        gpu = torch.cuda.get_device_name(device)
        raise SettingError(
            "{precision} bf16: {gpu} ({device}) does not support bfloat16; use fp16 or fp32",
            ["precision"],
            gpu=gpu,
            device=device,
        )
    return precision


def torch_dtype(precision: str):
    """The torch dtype of ``fp32``, ``bf16`` or ``fp16``."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def autocast(precision: str, device: str):
    """``torch.autocast`` for ``bf16`` / ``fp16`` on ``device`` (checked first, ``auto`` resolved); a no-op
    context for ``fp32``."""
    precision = check_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device.split(":", 1)[0], dtype=torch_dtype(precision))


def in_float32(fn):
    """``fn`` (a loss term) run in float32 whatever autocast is on around it: its tensor arguments (also those in a
    list or tuple) of a lower floating precision are cast to float32 and autocast is off on their devices while it
    runs. Under bf16 autocast a similarity matrix, its temperature scaling and the log-softmax over it would
    otherwise be bfloat16 (8 bits of mantissa: cosines 1/256 apart are one value, divided by a temperature of 0.05);
    with this the loss is the float32 loss of the (bf16-rounded) embeddings the model gave, and the gradient flows
    back to them in their own dtype."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        import torch

        devices: set[str] = set()
        cast: dict[int, torch.Tensor] = {}  # a tensor given twice is cast once (one gradient path back)

        def up(value):
            if isinstance(value, (list, tuple)):
                return type(value)(up(item) for item in value)
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                devices.add(value.device.type)
                if value.dtype in (torch.float16, torch.bfloat16):
                    return cast.setdefault(id(value), value.float())
            return value

        args, kwargs = up(args), {key: up(value) for key, value in kwargs.items()}
        available = getattr(torch.amp, "is_autocast_available", lambda kind: kind in ("cpu", "cuda"))
        with contextlib.ExitStack() as stack:
            for kind in sorted(devices):
                if available(kind):
                    stack.enter_context(torch.autocast(device_type=kind, enabled=False))
            return fn(*args, **kwargs)

    return run
