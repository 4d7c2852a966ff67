"""The statistics: intervals, exact and stratified tests, multiplicity, the shift fit over beta; data in, numbers out."""
