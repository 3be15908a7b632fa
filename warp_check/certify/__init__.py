"""The certify layer: Cert 1–3 from the repaired weights in float64, attacks that try to break
them, the certified artefact on disk and its verification from scratch.
"""
