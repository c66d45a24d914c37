"""Yun et al. 2022, *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network* (ECCV)."""
