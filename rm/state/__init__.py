"""The RM's model of the world: the cluster's nodes and allocations, the pool tree and operations."""
