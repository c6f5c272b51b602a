"""Transports move protocol messages between NodeManagers and the RM; they never interpret them."""
