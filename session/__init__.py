"""One conversation's state in this process: its record of compactions, its prompt-cache
clock, and the registry that holds the states."""
