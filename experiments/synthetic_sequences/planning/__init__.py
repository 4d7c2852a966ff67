"""The planner the Snakefile imports: the run grid, its training chunks, what the tables may read, Slurm recovery.

No torch or pandas here: the Snakefile imports it at parse time.
"""
