"""`trainyard simulate`: a job trace through the stack's Kueue queues (docs/simulate.md)."""
