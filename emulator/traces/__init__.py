"""Trace replay: SLS JSON (+ nodes file), Rumen, SYNTH and Google 2011 task events, read into one
model (``model``) and turned into scenario operations (``convert``)."""

FORMATS = ("sls", "rumen", "synth", "google2011")
