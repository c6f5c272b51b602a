"""The built-in scheduling policies (entry-point group ``hbemu.policies``)."""
