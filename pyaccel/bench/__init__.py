"""`pyaccel bench`: suites, runners, output equality, memory, fingerprints, reports and plots, the n-gram oracle, the replay tool, cost reports."""
