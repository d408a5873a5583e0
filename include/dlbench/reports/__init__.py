"""Reports: comparisons and plots built from the warehouse."""
