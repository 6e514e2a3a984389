"""What an audit found and how it reads: per-scenario results, the decision, the one report
and its text and pictures."""
