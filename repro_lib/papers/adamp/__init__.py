"""Heo et al. 2021, *AdamP: Slowing Down the Slowdown for Momentum Optimizers on Scale-invariant Weights* (ICLR)."""
