"""The running of chunks: evidence drawn by drawers on the one scheduler, in this process, on
workers or an executor, with checkpoints; the plan of sample sizes each chunk draws to."""
