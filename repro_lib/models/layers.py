"""Layers of the scale-invariant networks of Yun et al., *On the Angular Update and Hyperparameter Tuning of a
Scale-Invariant Network*, ECCV 2022, Sec. 3.1 ("Network modification"):

    "We add normalization without affine transform after global average pooling and fix the parameters of the FC
    layer as done in [8,18,19]. We use ghost batch normalization (GBN) [7] with a ghost batch size of 64 as the
    normalization layers."

* :class:`GhostBatchNorm` -- ghost batch normalization (Hoffer, Hubara & Soudry 2017, "Train longer, generalize
  better", Alg. 1) for inputs ``(B, C, *spatial)``: one module for the 2-D conv features and the 1-D pooled features.
* :class:`FixedLinear` -- the fixed (non-trainable) classifier. Initialised exactly like ``torch.nn.Linear``
  (weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))) and then never trained: "fixed to its random
  initialization" (Li & Arora, ICLR 2020, App. E, following Hoffer et al. 2018 "Fix your classifier"). Weight and
  bias are *buffers*, not parameters, so no optimizer, weight decay or gradient ever touches them, they are saved
  in ``state_dict`` and follow ``.to(device)``.
* :func:`norm_layer` -- the factory the model files use: standard affine BN for the unmodified net, non-affine
  ghost BN for the scale-invariant net.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["GhostBatchNorm", "FixedLinear", "norm_layer", "ghost_chunk_sizes"]


def ghost_chunk_sizes(batch: int, ghost_batch: int, min_chunk: int = 2) -> list[int]:
    """Sizes of the consecutive ghost batches a training batch of ``batch`` samples is split into.

    Chunks of ``ghost_batch`` consecutive samples; a remainder ``r = batch % ghost_batch`` with ``r >= min_chunk``
    is its own (smaller) ghost batch normalized with its own statistics (``torch.split`` semantics, as in Hoffer
    et al. 2017, who split the batch into ghost batches); a remainder with ``0 < r < min_chunk`` is merged into the
    preceding chunk. With the default ``min_chunk=2`` only a single left-over sample is merged: batch statistics of
    one sample are degenerate (zero output after the pooled 1-D normalization, which ``F.batch_norm`` refuses).
    A batch of at most ``ghost_batch`` samples is one chunk.

    >>> ghost_chunk_sizes(200, 64)
    [64, 64, 64, 8]
    >>> ghost_chunk_sizes(129, 64)
    [64, 65]
    """
    if batch <= ghost_batch:
        return [batch]
    k, r = divmod(batch, ghost_batch)
    sizes = [ghost_batch] * k
    if r >= min_chunk:
        sizes.append(r)
    elif r > 0:
        sizes[-1] += r
    return sizes


class GhostBatchNorm(nn.modules.batchnorm._NormBase):
    """Ghost batch normalization over ``(B, C, *spatial)`` inputs (any number of spatial dims, including none).

    Training mode: the batch is split into consecutive chunks (:func:`ghost_chunk_sizes`); each chunk is
    normalized with its own per-channel mean and biased variance, exactly like ``F.batch_norm(training=True)``
    applied chunk by chunk. The running statistics are updated as if the chunks had been seen one after another,
    each with PyTorch's rule ``r <- (1-m) r + m s_j`` (``s_j`` = chunk mean / *unbiased* chunk variance), in closed
    form: ``r_k = (1-m)^k r_0 + sum_j m (1-m)^(k-1-j) s_j``; ``num_batches_tracked`` grows by the number of chunks.
    Implementation: one fused ``F.batch_norm`` per chunk on the chunk's slice of the batch (a view, no copy) and
    one ``torch.cat`` of the outputs. The earlier single call on a transposed copy ``(k, g, C, L) -> (g, k*C, L)``
    spent 31 % (fp32) / 39 % (bf16) of the GPU time of a ResNet-18 training step at B = 128 in strided copies
    (torch.profiler on an H200, ``benchmarks/profile_step.py``); replacing it made the graphed step (``cuda_graphs``)
    1.5x faster (H200, B = 128: 3.39 -> 2.23 s per 50k-image fp32 epoch, 2.53 -> 1.66 s bf16) and the layer
    1.1-2.8x faster on CPU. Eagerly on a GPU the k = B / ghost_batch small launches per layer cost more than the
    copies saved in an isolated layer (``benchmarks/bench_ghost_bn.py``); in the whole eager step the two were within
    6 % (4.17 vs 4.42 s per epoch at B = 128, two runs on two machines).

    Eval mode: ``F.batch_norm`` with the running statistics (as ``nn.BatchNorm``).

    ``affine=False`` (the default here) is the scale-invariant setting of Yun et al. Sec. 3.1. ``momentum`` must be a
    float (cumulative averaging, ``momentum=None``, is not supported).
    """

    def __init__(self, num_features: int, ghost_batch: int = 64, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, min_chunk: int = 2, device=None, dtype=None):
        if momentum is None:
            raise ValueError("GhostBatchNorm: momentum=None (cumulative average) is not supported")
        if ghost_batch < 1 or min_chunk < 1:
            raise ValueError(f"GhostBatchNorm: ghost_batch and min_chunk must be >= 1, got {ghost_batch}, {min_chunk}")
        super().__init__(num_features, eps, momentum, affine, True, device=device, dtype=dtype)
        self.ghost_batch = int(ghost_batch)
        self.min_chunk = int(min_chunk)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", ghost_batch={self.ghost_batch}, min_chunk={self.min_chunk}"

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(f"GhostBatchNorm: expected (B, {self.num_features}, ...) input, got {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input_dim(x)
        if not self.training:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        sizes = ghost_chunk_sizes(x.shape[0], self.ghost_batch, self.min_chunk)
        if len(sizes) == 1:  # one chunk: plain batch norm (fused kernel), running stats updated by it
            self.num_batches_tracked.add_(1)
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, True,
                                self.momentum, self.eps)
        # Each ghost batch is a slice along the batch dimension -- a contiguous tensor in NCHW and in channels_last
        # alike -- normalized by its own fused F.batch_norm call; temporary running buffers with momentum 1.0 (rows
        # of ``mean``/``var``) receive exactly the chunk's mean and unbiased variance, combined below in closed form.
        # The chunks' outputs are concatenated (one contiguous copy forward; the backward of cat is free slicing).
        mean = self.running_mean.new_zeros(len(sizes), x.shape[1])
        var = self.running_var.new_ones(len(sizes), x.shape[1])
        y = torch.cat([F.batch_norm(xc, mean[j], var[j], self.weight, self.bias, True, 1.0, self.eps)
                       for j, xc in enumerate(x.split(sizes))])
        self._update_running_stats(mean, var)
        return y

    def _chunk_weights(self, k: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """``m (1-m)^(k-1-j)`` for j = 0..k-1 (the weight of chunk j after k sequential updates), made once per
        (k, dtype, device) on the device -- no host-to-device copy inside a training step (CUDA-graph safe)."""
        key = (k, dtype, device)
        cache = self.__dict__.setdefault("_chunk_weight_cache", {})
        if key not in cache:
            m = float(self.momentum)
            cache[key] = m * (1.0 - m) ** torch.arange(k - 1, -1, -1, dtype=dtype, device=device)
        return cache[key]

    @torch.no_grad()
    def _update_running_stats(self, mean: torch.Tensor, var: torch.Tensor) -> None:
        """Sequential momentum update over the k chunks (rows of ``mean``/``var``, unbiased), in closed form:
        ``r <- (1-m)^k r + sum_j m (1-m)^(k-1-j) s_j``, one fused ``addmv_`` per buffer."""
        m = float(self.momentum)
        mean, var = mean.to(self.running_mean.dtype), var.to(self.running_var.dtype)
        k = mean.shape[0]
        w = self._chunk_weights(k, mean.dtype, mean.device)  # (k,)
        decay = (1.0 - m) ** k
        self.running_mean.addmv_(mean.t(), w, beta=decay)
        self.running_var.addmv_(var.t(), w, beta=decay)
        self.num_batches_tracked.add_(k)


class FixedLinear(nn.Module):
    """A linear classifier that is never trained (Yun et al. Sec. 3.1; Li & Arora 2020 App. E; Hoffer et al. 2018).

    Initialised like ``nn.Linear`` (weight and bias ~ U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn from the
    global RNG, so the model seed fixes it) and kept as buffers, so it is not a parameter at all.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.register_buffer("weight", torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.register_buffer("bias", torch.empty(out_features).uniform_(-bound, bound) if bias else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, fixed"


def norm_layer(num_features: int, scale_invariant: bool, ghost_batch: int = 64, dim: int = 2) -> nn.Module:
    """The normalization of the model files: ``nn.BatchNorm{1,2}d`` (affine) for the unmodified network,
    ``GhostBatchNorm(ghost_batch, affine=False)`` for the scale-invariant one (Yun et al. Sec. 3.1)."""
    if scale_invariant:
        return GhostBatchNorm(num_features, ghost_batch=ghost_batch, affine=False)
    return nn.BatchNorm2d(num_features) if dim == 2 else nn.BatchNorm1d(num_features)
