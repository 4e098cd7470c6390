"""One Adam step on one flat fp32 shard (Kingma & Ba 2015, Algorithm 1; AdamW: Loshchilov & Hutter 2019).

Adam is elementwise, which is what makes ZeRO's sharding possible (ZeRO §5.1: rank i updates only partition i):
the update of element j needs only grad[j], m[j], v[j] and master[j]. The operation order follows
``torch.optim.Adam(foreach=False)`` (``torch/optim/adam.py``, ``_single_tensor_adam``, non-capturable branch):

    m  = lerp(m, g, 1 - beta1)                   # exp_avg.lerp_(grad, 1 - beta1)
    v  = v * beta2 + (1 - beta2) * g * g         # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** step          # Python floats (fp64)
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    denom = sqrt(v) / sqrt(bias_correction2) + eps
    master = master + (-step_size) * m / denom   # param.addcdiv_(exp_avg, denom, value=-step_size)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AdamConfig", "adam_step"]


@dataclass(frozen=True)
class AdamConfig:
    """Adam hyper-parameters. ``decoupled=True`` gives AdamW's weight decay."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False


def adam_step(master: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, step: int,
              config: AdamConfig = AdamConfig()) -> None:
    """Update ``master``, ``m`` and ``v`` (1-D fp32, same length as ``grad``) in place; ``step`` counts from 1."""
    for name, a in (("master", master), ("grad", grad), ("m", m), ("v", v)):
        if not isinstance(a, np.ndarray) or a.dtype != np.float32 or a.ndim != 1 or a.shape != grad.shape:
            raise TypeError(f"adam_step: {name} must be a 1-D float32 array of length {grad.shape}")
    if step < 1:
        raise ValueError(f"adam_step: step counts from 1; got {step}")
    c = config
    g = grad
    if c.weight_decay:
        if c.decoupled:
            master *= np.float32(1 - c.lr * c.weight_decay)
        else:
            g = g + np.float32(c.weight_decay) * master
    m += (g - m) * np.float32(1 - c.beta1)
    v *= np.float32(c.beta2)
    v += np.float32(1 - c.beta2) * (g * g)
    bias_correction1 = 1 - c.beta1 ** step
    bias_correction2 = 1 - c.beta2 ** step
    step_size = c.lr / bias_correction1
    denom = np.sqrt(v) / np.float32(bias_correction2 ** 0.5) + np.float32(c.eps)
    master += np.float32(-step_size) * (m / denom)
