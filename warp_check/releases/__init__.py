"""The releases a suite names: the model under test, loaded for the suite; its baseline (the last
release) and the suite loaded on it; and the regressions a repair restores from it."""
