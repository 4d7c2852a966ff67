"""The data splits: every one is generated and evaluated on; the z-free model scores the two the trainer reads b_i from."""

SPLITS = ("train", "val", "test")
SCORED_SPLITS = ("train", "val")
