"""interfaces/cli."""
