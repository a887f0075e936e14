"""Grids of runs and where they run: grid files, the plan of what reproduce trains, executors, Slurm."""
