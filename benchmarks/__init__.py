"""Side-by-side benchmarks: ratios against a peer on the same data in the same run."""
