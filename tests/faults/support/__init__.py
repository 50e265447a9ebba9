"""Helpers of the reliability suite (tests/faults): a crash child, a loop thread, corpora."""
