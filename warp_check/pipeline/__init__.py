"""A suite's cases through the model and through a repair: each case encoded (its v, prediction and
gap), neighbourhoods of perturbed copies, the separation check, and the ladder of repair strategies;
``repair_cases`` in ``runs`` climbs it. Below the suite: it takes cases and an adapter, never a file."""
