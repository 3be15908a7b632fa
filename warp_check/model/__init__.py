"""The model layer: a sequence classifier seen as encoder → v → W_c σ(W v + b) + b_c.

Where the head is (``specs``), how a folder loads (``loading``), v captured exactly
(``adapter``), the head as float64 arrays (``head``, ``activations``), every case's v in one
batched pass (``encode``) and the digests that name what a model computes with (``hashing``).
"""
