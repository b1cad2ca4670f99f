"""Pure sample math: G.711, PCM conversions, resampling for VAD, levels."""
