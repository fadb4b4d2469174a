"""Engine-neutral conformance suite for the Hudi format: fixture tables and expected results."""
