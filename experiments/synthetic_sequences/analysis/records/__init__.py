"""What the analysis reads: a finished run's files, its metrics file and learning curves, the runs table."""
