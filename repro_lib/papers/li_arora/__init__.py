"""Li & Arora 2020, *An Exponential Learning Rate Schedule for Deep Learning* (ICLR)."""
