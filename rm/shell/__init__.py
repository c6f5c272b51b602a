"""The RM process: the ResourceManager shell, one life of the RM, the services it owns."""
