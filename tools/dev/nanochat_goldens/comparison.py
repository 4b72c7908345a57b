"""--verify's rules: a tensor against the stored one within a tolerance, and docs/parity.md's optimizer rule
for the weights after a step. Each result is (name, error, tolerance, passed)."""

import math

import numpy as np
import torch


def compare(name, got, expected, rtol, atol):
    """(name, max |got - expected|, tolerance atol + rtol * max |expected|, passed)."""
    got = np.asarray(got.detach().to(torch.float64).numpy() if torch.is_tensor(got) else got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        return (name, math.inf, 0.0, False)
    error = float(np.max(np.abs(got - expected))) if got.size else 0.0
    tolerance = atol + rtol * (float(np.max(np.abs(expected))) if expected.size else 0.0)
    return (name, error, tolerance, bool(np.all(np.isfinite(got))) and error <= tolerance)


def compare_step(name, k, got, expected, before, decay_sum, bf16):
    """The optimizer rule of docs/parity.md: per element |got - exp| <= 1e-3 max|exp - before| + (k+1) fp32
    ulps of max|exp|, except up to ceil(1e-4 numel) cautious-decay sign flips within 1.05 decay_sum |w|; for
    Muon tensors of a bf16 orthogonalisation, ||got - exp|| <= 0.5 ||exp - before|| (Frobenius)."""
    got, expected, before = (np.asarray(a, dtype=np.float64) for a in (got, expected, before))
    if got.shape != expected.shape or not np.all(np.isfinite(got)):
        return (name, math.inf, 0.0, False)
    if bf16:
        error = float(np.linalg.norm(got - expected))
        tolerance = 0.5 * float(np.linalg.norm(expected - before))
        return (name, error, tolerance, error <= tolerance)
    top = float(np.max(np.abs(expected)))
    tolerance = 1e-3 * float(np.max(np.abs(expected - before))) + (k + 1) * float(
        np.spacing(np.float32(top)))
    error = np.abs(got - expected)
    outside = error > tolerance
    flips = outside & (error <= 1.05 * decay_sum * np.maximum(np.abs(before), np.abs(expected)))
    worst = float(np.max(np.where(outside & ~flips | ~outside, error, 0.0)))
    allowed = math.ceil(1e-4 * expected.size)
    return (name, worst, tolerance, worst <= tolerance and int(flips.sum()) <= allowed)
