"""Pure per-direction analysis: speech detection, playout, ground truth."""
