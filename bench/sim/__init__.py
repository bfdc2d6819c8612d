"""Simulator throughput: a task's env-steps/s against its raw physics backend."""
