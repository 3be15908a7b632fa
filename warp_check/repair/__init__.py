"""The repair layer: the WARP loop (paper Algorithm 1) with GSN and GSN-FT, from cached v."""
