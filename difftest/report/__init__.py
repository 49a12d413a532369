"""What a run hands back: reports written and read, the HTML page, JUnit, merging shards, and the CI
gate that compares a baseline with a candidate."""
