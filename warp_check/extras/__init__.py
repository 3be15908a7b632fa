"""Optional capabilities beside the core: TextAttack recipes (``attacks``), hypothesis text
strategies and invariance checks (``strategies``, ``invariance``), and the fine-tuning and LoRA
baselines of ``warp-check compare`` (``baselines``, ``compare``).
"""
