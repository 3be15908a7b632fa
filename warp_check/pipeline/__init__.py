"""A suite's cases through the model and through a repair: the model loaded for a suite, each case
encoded (its v, prediction and gap), neighbourhoods of perturbed copies, the ladder of repair
strategies, and regressions restored from a baseline; ``repair_cases`` in ``runs`` climbs it."""
