"""Back-matching propagation and scale-amended SGD (Zhang, Chen, Liu), supplementary material."""
