"""Optional capabilities beside the core: TextAttack recipes (``attacks``), invariance checks
over the text perturbations of :mod:`warp_check.perturb` (``invariance``), and the fine-tuning and LoRA
baselines of ``warp-check compare`` (``baselines``, ``compare``).
"""
