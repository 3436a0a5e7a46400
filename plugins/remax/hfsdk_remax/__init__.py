"""ReMax: greedy-baseline generation, no critic."""
