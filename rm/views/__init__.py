"""What the RM shows the outside world: snapshots, events to observers, why tasks wait."""
