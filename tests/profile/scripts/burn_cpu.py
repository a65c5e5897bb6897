"""Burns one core until killed: the other process a contention test needs."""
while True:
    pass
