"""What runs remember between them: representation shards, file digests, warm check entries.

A cache is an optimisation: a damaged or missing entry is a miss, never an error.
"""
