"""The analysis: a finished run's metrics, the contrasts between arms, the verdict, the tables and the plots."""
