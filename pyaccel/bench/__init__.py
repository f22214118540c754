"""`pyaccel bench`: suites, runners, the n-gram oracle, the replay tool, cost reports."""
