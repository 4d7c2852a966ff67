"""The arms compared: the contrasts table, each contrast's reading, take-up counts, confounds and the beta axis."""
